"""The emulator daemon: one process per emulated host, serving one FUSE mount of the backing dir.

Run by ``EmulatedHost.start``; by hand:

    python -m tests.harness.nfsemu.daemon --backing SERVER --mountpoint MNT \\
        --control nfsemu-a --lease-s 1.0

It runs in the foreground until the mount is unmounted (``fusermount3 -u``) or
it is killed. Signals do not reach Python handlers while ``fuse_main`` runs,
so the controller never relies on them: it sends ``shutdown`` on the control
socket (every waiting operation fails at once), unmounts, and kills by pid.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from mfusepy import FUSE

from tests.harness.nfsemu.control import ControlServer
from tests.harness.nfsemu.faults import PathFaults
from tests.harness.nfsemu.locks import LockTable
from tests.harness.nfsemu.network import Mode, Network
from tests.harness.nfsemu.passthrough import PassthroughClient

log = logging.getLogger("nfsemu")


def mount_uncached(
    operations: Any, mountpoint: str, fsname: str, subtype: str, debug: bool
) -> None:
    """Serve ``operations`` on ``mountpoint`` in the foreground until unmounted, mounted as
    primacy's NFS profile mounts a share: every lookup and stat reaches the daemon, like
    lookupcache=none and noac on NFS (without it a replaced file stays hidden)."""
    FUSE(
        operations,
        mountpoint,
        raw_fi=True,
        foreground=True,
        debug=debug,
        fsname=fsname,
        subtype=subtype,
        allow_other=True,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
        use_ino=True,
        direct_io=True,
    )


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nfsemu", description=__doc__.splitlines()[0])
    parser.add_argument("--backing", required=True, help="the shared directory (the server)")
    parser.add_argument("--mountpoint", required=True, help="where this host sees the share")
    parser.add_argument("--control", required=True, help="abstract Unix socket name")
    parser.add_argument(
        "--lease-s", type=float, default=1.0, help="partition length after which locks drop"
    )
    parser.add_argument("--debug", action="store_true", help="log every FUSE request")
    return parser.parse_args(argv)


class Daemon:
    """The state of one emulated client and the commands that change it."""

    def __init__(self, backing: str, lease_s: float) -> None:
        self.locks = LockTable()
        self.network = Network(lease_s, on_lease_expired=self._lease_expired)
        self.faults = PathFaults()
        self.operations = PassthroughClient(backing, self.network, self.locks, self.faults)

    def _lease_expired(self) -> None:
        log.warning(
            "lease expired: dropping %d lock owner(s) on the server", self.locks.held_count()
        )
        self.locks.expire()

    def command(self, line: str) -> dict[str, Any]:
        log.info("control: %s", line)
        command, _, argument = line.partition(" ")
        if command == "partition-eio":
            self.network.partition(Mode.PARTITION_EIO)
        elif command == "partition-hang":
            self.network.partition(Mode.PARTITION_HANG)
        elif command == "heal":
            self.network.heal(on_healed=self.locks.apply_deferred)
        elif command == "expire":
            self.network.expire_now()
        elif command == "shutdown":
            self.network.stop()
        elif command == "slow-fsync":
            self.faults.slow_fsync(float(argument))
        elif command == "eio-path":
            self.faults.eio_under(argument.strip())
        elif command == "clear-faults":
            self.faults.clear()
        return {**self.network.snapshot(), **self.locks.snapshot(), **self.faults.snapshot()}


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    daemon = Daemon(args.backing, args.lease_s)
    ControlServer(args.control, daemon.command).start()
    log.info("serving %s on %s (lease %.3f s)", args.backing, args.mountpoint, args.lease_s)
    try:
        mount_uncached(
            daemon.operations, args.mountpoint, f"nfsemu:{args.backing}", "nfsemu", args.debug
        )
    finally:
        daemon.network.stop()
        daemon.locks.close_all()
        log.info("unmounted %s", args.mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
