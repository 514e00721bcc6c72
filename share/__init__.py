"""The share: its layout, the one safe-I/O module, typed records, and the port the node uses."""
