"""The node: configuration, the role state machine, its shell, child processes and the CLI."""
