"""The built-in transport connector: STOMP 1.0, 1.1 and 1.2, persistent queues in the journal."""
