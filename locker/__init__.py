"""The lock on the shared data directory and the epoch (fencing token) that goes with it."""
