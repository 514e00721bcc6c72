"""The node shell: the role loop (``node``) and the threads it owns (lock I/O, the registry,
serving, the admin actions, systemd notifications, the config watch)."""
