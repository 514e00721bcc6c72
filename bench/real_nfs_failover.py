"""Failover on a real NFSv4 server (issue 29): how the server's lease, the keepalive and the
takeover wait add up, for a master whose host crashes and for one whose link is cut.

For each lease length, a fresh nfs-ganesha (tests/harness/ganesha) and a two-node
group with the nfs4 profile's timings (keepalive 2 s, a lock try every 1 s), then
one fault, repeated ``--runs`` times:

- **crash**: the master's NFS client is killed (no unlock reaches the server), then
  its supervisor. Reported: when the other node got the lock (its epoch claim,
  PRIMACY-1002: the earliest a lock-only design such as ActiveMQ's could start),
  and when it answered 200 on /master.
- **cut**: the master's link is dropped (nft). Reported: when the old master stopped
  answering 200 (it demotes on its own), and when the other node served.

Each lease and fault runs once per ``--stall-takeover-ms`` value: the profile's
(6000: a slave replaces the lock file of a master whose registry entry stopped
changing) and 0 (the lock only, as ActiveMQ's shared-file master/slave: the new
master waits for the server to expire the dead client's lease), side by side.

Times are from the fault, in seconds, min / median / max. Needs root, /dev/fuse,
network namespaces and `.ci/setup dev`'s Debian packages.

    python bench/real_nfs_failover.py --leases 4 10 --runs 3
    python bench/real_nfs_failover.py --leases 60 --faults crash --stall-takeover-ms 6000 0
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import platform
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primacy.nfs_profiles.profiles import load_profile
from tests.harness.chaos_real_nfs import NFS4_PROFILE
from tests.harness.emulated_group import EmulatedGroup
from tests.harness.ganesha.host import RealNfsHosts
from tests.harness.ganesha.server import GaneshaServer, real_nfs_unavailable_reason

_POLL_S = 0.02
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*PRIMACY-1002", re.MULTILINE)


def _first_claim_after(log: str, after_unix: float) -> float | None:
    for stamp in _LOG_TIME.findall(log):
        at = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if at >= after_unix:
            return at
    return None


def one_run(root: Path, lease_s: int, fault: str, stall_ms: int) -> dict[str, float]:
    server = GaneshaServer.start(root, lease_s=lease_s)
    hosts = RealNfsHosts(root, server)
    try:
        group = EmulatedGroup(hosts, 2, extra=(*NFS4_PROFILE, "--stall-takeover-ms", str(stall_ms)))
        old, new = group.nodes["n1"], group.nodes["n2"]
        host = group.host_of(old)
        time.sleep(min(lease_s, 15))  # a master in its steady state: renewals and checks
        started, started_unix = time.monotonic(), time.time()
        if fault == "crash":
            host.crash()
            old.signal(signal.SIGKILL)
        else:
            host.partition()
        figures: dict[str, float] = {}
        deadline = started + 10 * lease_s + 60
        while time.monotonic() < deadline and "new master serves" not in figures:
            now = time.monotonic() - started
            if fault == "cut" and "old master stops" not in figures and not old.is_master():
                figures["old master stops"] = now
            if new.is_master():
                figures["new master serves"] = now
            time.sleep(_POLL_S)
        claim = _first_claim_after(new.log(), started_unix)
        if claim is not None:
            figures["new master has the lock"] = claim - started_unix
        if fault == "cut":
            host.heal()
        return figures
    finally:
        hosts.close()
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--leases", type=int, nargs="+", default=[4, 10])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--faults", nargs="+", choices=("crash", "cut"), default=["crash", "cut"])
    parser.add_argument(
        "--stall-takeover-ms",
        type=int,
        nargs="+",
        default=[load_profile("nfs4").timings.stall_takeover_ms],
        help="one run set per value; 0: the lock only (default: the nfs4 profile's)",
    )
    args = parser.parse_args(argv)
    reason = real_nfs_unavailable_reason()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="primacy-real-nfs-failover-"))
    try:
        for lease_s in args.leases:
            for fault, stall_ms in itertools.product(args.faults, args.stall_takeover_ms):
                samples: dict[str, list[float]] = {}
                for run in range(args.runs):
                    root = workdir / f"lease{lease_s}-{fault}-{stall_ms}-{run}"
                    root.mkdir()
                    for name, value in one_run(root, lease_s, fault, stall_ms).items():
                        samples.setdefault(name, []).append(value)
                for name, values in samples.items():
                    print(
                        f"lease {lease_s:>3} s  {fault:<5}  stall {stall_ms:>5} ms  {name:<24} "
                        f"min {min(values):6.2f}  median {statistics.median(values):6.2f}  "
                        f"max {max(values):6.2f}  (n={len(values)})",
                        flush=True,
                    )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"date: {datetime.date.today()}  machine: {platform.node()}, "
        f"{platform.system()} {platform.release()}; keepalive 2 s, lock try every 1 s, "
        "takeover wait 2.2 s (nfs4 profile)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
