"""The node: configuration, the role state machine, its threaded shell, child processes and the CLI."""
