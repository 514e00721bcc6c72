"""An NFSv4 client emulator on FUSE: per-host mounts of one directory, partitions, leases."""

from tests.harness.nfsemu.host import EmulatedHost, is_mounted

__all__ = ["EmulatedHost", "is_mounted"]
