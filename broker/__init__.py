"""The built-in transport connector: STOMP 1.2 over persistent queues kept in the journal."""
