"""An NFSv4 client emulator on FUSE: per-host mounts of one directory, partitions, leases."""

from tests.fault.nfsemu.host import EmulatedHost, is_mounted

__all__ = ["EmulatedHost", "is_mounted"]
