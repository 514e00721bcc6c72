"""One host's FUSE daemon on the real NFSv4 server: its mount of the share, through libnfs.

Started by ``RealNfsHost.start`` inside the host's network namespace
(``nsenter --net=...``: only the network is the host's; the mount is made in
the test's mount namespace, where the supervisors see it):

    nsenter --net=/run/netns/H python -m tests.harness.ganesha.daemon \\
        --server 10.77.1.1 --host-name a --mountpoint MNT --control nfsreal-a --lease-s 4

Commands on the control socket (the nfsemu protocol, ``tests/harness/nfsemu/control.py``):
``status``, ``shutdown``, ``slow-fsync MS`` (here: every reply of the server
late by MS milliseconds, a slow server), ``clear-faults``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from tests.harness.ganesha.client import NfsHostClient, ServerLink
from tests.harness.nfsemu.control import ControlServer
from tests.harness.nfsemu.daemon import mount_uncached

log = logging.getLogger("nfsreal")


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nfsreal", description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="the server's address")
    parser.add_argument("--export", default="/", help="the export's pseudo path")
    parser.add_argument("--host-name", required=True, help="this host's NFSv4 client name")
    parser.add_argument("--mountpoint", required=True)
    parser.add_argument("--control", required=True, help="abstract Unix socket name")
    parser.add_argument("--lease-s", type=float, required=True, help="the server's lease")
    parser.add_argument("--timeout-ms", type=int, default=2000, help="a call's timeout (soft)")
    parser.add_argument("--debug", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    link = ServerLink(args.server, args.export, args.host_name, args.timeout_ms, args.lease_s)
    operations = NfsHostClient(link)

    def command(line: str) -> dict[str, Any]:
        log.info("control: %s", line)
        name, _, argument = line.partition(" ")
        if name == "slow-fsync":
            link.slow_ms = float(argument)
        elif name == "clear-faults":
            link.slow_ms = 0.0
        elif name not in ("status", "shutdown"):
            raise ValueError(f"{name!r} is not a fault of the real server; cut the link instead")
        return {"slow_ms": link.slow_ms, "host": args.host_name}

    ControlServer(args.control, command).start()
    log.info("serving %s:%s on %s", args.server, args.export, args.mountpoint)
    try:
        mount_uncached(
            operations, args.mountpoint, f"{args.server}:{args.export}", "nfsreal", args.debug
        )
    finally:
        operations.close()
        log.info("unmounted %s", args.mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
