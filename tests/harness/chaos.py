"""Randomized fault trials: a fresh group on emulated NFS hosts, random faults, then the checker.

Trial ``n`` of a run with seed ``S`` draws everything from ``random.Random(S + n)``,
so ``bench/chaos.py --trials 1 --seed S+n`` replays it alone. Each trial runs
a 2- or 3-node group whose share is a small tmpfs (so a full share can be
staged), two producers and a consumer, and one to three faults at random
times, each ended before the next; ``bench/chaos.py`` prints the figures.
"""

from __future__ import annotations

import collections
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from primacy.broker.event_loop import EventLoopKind, resolve
from primacy.cli.localgroup import NodeProcess
from primacy.share.port import latest_epoch
from primacy.share.posix import PosixShare
from primacy.store import format as fmt
from primacy.store.segments import list_segments
from tests.harness.checker import Verdict, check
from tests.harness.crafted_files import plant_random
from tests.harness.emulated_group import (
    EmulatedGroup,
    mount_tmpfs,
    replace_lock_file,
    share_filled,
)
from tests.harness.emulated_hosts import EmulatedHosts
from tests.harness.group import MasterPoller
from tests.harness.traffic import Traffic

LEASE_S = 1.0
SHARE_SIZE = "8m"  # a tmpfs this small fills in a moment when a fault asks for it
_RECOVERY_S = 60.0  # how long a group may take to serve again after a fault ends
# 127.0.0.2 to 127.255.255.254: 127.0.0.1 is left to everything else on the machine.
LOOPBACK_FIRST = int(ipaddress.IPv4Address("127.0.0.2"))
LOOPBACK_COUNT = int(ipaddress.IPv4Address("127.255.255.254")) - LOOPBACK_FIRST + 1


def _partition(
    mode: str, hold_s: tuple[float, float]
) -> Callable[[EmulatedGroup, random.Random], None]:
    def inject(group: EmulatedGroup, rng: random.Random) -> None:
        host = group.host_of(group.wait_for_master())
        host.partition(mode)  # type: ignore[arg-type]
        try:
            time.sleep(rng.uniform(*hold_s))
        finally:
            host.heal()

    return inject


def _freeze_and_replace_lock(group: EmulatedGroup, rng: random.Random) -> None:
    master = group.wait_for_master()
    other = rng.choice([n for n in group.nodes.values() if n.node_id != master.node_id])
    master.signal(signal.SIGSTOP)
    try:
        replace_lock_file(group.host_of(other))
        time.sleep(rng.uniform(0.5, 2.0))  # the new master takes over meanwhile
    finally:
        master.signal(signal.SIGCONT)


def _fill_the_share(group: EmulatedGroup, rng: random.Random) -> None:
    with share_filled(group.backing):
        time.sleep(rng.uniform(0.5, 2.0))


def _slow_fsync(group: EmulatedGroup, rng: random.Random) -> None:
    host = group.host_of(group.wait_for_master())
    host.slow_fsync(rng.uniform(50, 400))
    try:
        time.sleep(rng.uniform(0.5, 2.0))
    finally:
        host.clear_faults()


def _journal_eio(group: EmulatedGroup, rng: random.Random) -> None:
    host = group.host_of(group.wait_for_master())
    host.eio_under("/journal")
    try:
        time.sleep(rng.uniform(0.3, 2.0))
    finally:
        host.clear_faults()


def _crafted_files_then_takeover(group: EmulatedGroup, rng: random.Random) -> None:
    """One to three files crafted to pass primacy's first checks (a CRC-valid checkpoint with
    a number out of range, a segment of an unclaimed epoch with a valid header: issue 27),
    planted on the server; then the master is cut off past its lease, so the node that takes
    over reads them."""
    next_epoch = latest_epoch(PosixShare(group.backing)) + 1
    for _ in range(rng.randint(1, 3)):
        plant_random(group.backing, rng, next_epoch)
    _partition("eio", (LEASE_S * 1.2, LEASE_S * 2.5))(group, rng)


def _followed_tail_changed_then_takeover(group: EmulatedGroup, rng: random.Random) -> None:
    """Issue 44: what the slaves' followers read changes under them. The slaves are frozen,
    the master cut off past its lease, and on the server the newest segment is replaced by a
    copy of itself (another file: the same bytes), sometimes with a torn half batch of junk
    after it; then the slaves resume and one takes over: its follower must drop its state
    (the full recovery runs) and nothing acknowledged may be lost."""
    master = group.wait_for_master()
    slaves = [node for node in group.nodes.values() if node is not master]
    for slave in slaves:
        slave.signal(signal.SIGSTOP)
    host = group.host_of(master)
    host.partition("eio")
    try:
        time.sleep(LEASE_S * rng.uniform(1.2, 2.0))  # past the lease: the lock is free
        segments = list_segments(group.backing / "journal")
        if segments:
            newest = segments[-1].path
            copy = newest.with_name(".chaos-copy")
            shutil.copyfile(newest, copy)
            if rng.random() < 0.5:
                with copy.open("ab") as handle:
                    handle.write(fmt.BATCH_MAGIC + rng.randbytes(rng.randint(8, 200)))
            os.replace(copy, newest)
    finally:
        for slave in slaves:
            slave.signal(signal.SIGCONT)
        time.sleep(rng.uniform(0.5, 1.5))  # a slave takes over meanwhile
        host.heal()


def _follower_falls_behind_then_takeover(group: EmulatedGroup, rng: random.Random) -> None:
    """Issue 44: the slaves stop reading for a while (frozen) under traffic, resume, and the
    master is cut off at once: a slave takes over with its follower behind, so its recovery
    reads a long tail (or, past a checkpoint, the whole journal)."""
    master = group.wait_for_master()
    slaves = [node for node in group.nodes.values() if node is not master]
    for slave in slaves:
        slave.signal(signal.SIGSTOP)
    try:
        time.sleep(rng.uniform(0.5, 3.0))
    finally:
        for slave in slaves:
            slave.signal(signal.SIGCONT)
    _partition("eio", (LEASE_S * 1.2, LEASE_S * 2.5))(group, rng)


FAULTS: dict[str, Callable[[EmulatedGroup, random.Random], None]] = {
    "partition-eio past the lease": _partition("eio", (LEASE_S * 1.2, LEASE_S * 2.5)),
    "partition-hang past the lease": _partition("hang", (LEASE_S * 1.2, LEASE_S * 2.5)),
    "short partition-hang": _partition("hang", (0.05, 0.2)),
    "short partition-eio": _partition("eio", (0.05, 0.5)),
    "SIGSTOP + lock file replaced": _freeze_and_replace_lock,
    "share full (ENOSPC)": _fill_the_share,
    "slow fsync": _slow_fsync,
    "EIO on the journal only": _journal_eio,
    "crafted files planted, then a takeover": _crafted_files_then_takeover,
    "followed tail replaced, then a takeover": _followed_tail_changed_then_takeover,
    "follower behind, then a takeover": _follower_falls_behind_then_takeover,
}


@dataclass
class TrialResult:
    seed: int
    nodes: int
    faults: list[str]
    # Every node's STOMP loop: ``--stomp-event-loop`` when given one, else what auto runs.
    event_loop: EventLoopKind = field(default_factory=lambda: resolve("auto"))
    verdict: Verdict | None = None
    error: str | None = None  # the trial could not finish (no master came back, ...)

    @property
    def violations(self) -> list[str]:
        found = list(self.verdict.violations) if self.verdict else []
        return found + ([f"trial failed: {self.error}"] if self.error else [])


@dataclass
class LoopTotals:
    """One event loop's share of a run (bench/chaos.py ``--event-loop alternate``)."""

    trials: int = 0
    lost: int = 0
    duplicates: int = 0
    violating_trials: int = 0


@dataclass
class Totals:
    trials: int = 0
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    acknowledged: int = 0
    lost: int = 0
    duplicates: int = 0
    violating_trials: list[TrialResult] = field(default_factory=list)
    by_loop: dict[str, LoopTotals] = field(default_factory=dict)

    def add(self, result: TrialResult) -> None:
        self.trials += 1
        self.faults.update(result.faults)
        loop = self.by_loop.setdefault(result.event_loop, LoopTotals())
        loop.trials += 1
        if result.verdict is not None:
            self.acknowledged += result.verdict.acknowledged
            self.lost += len(result.verdict.lost)
            self.duplicates += len(result.verdict.duplicates)
            loop.lost += len(result.verdict.lost)
            loop.duplicates += len(result.verdict.duplicates)
        if result.violations:
            self.violating_trials.append(result)
            loop.violating_trials += 1


def trial_loopback_address(seed: int) -> str:
    """A loopback address of this trial's own for its STOMP ports. Trials that run at once
    have different seeds, so none can bind a port another reserved for a node that is not
    yet master, and no trial's clients reach another trial's broker (a 500-trial run on
    e93c5a8 saw that: two trials at once each counted the other's messages as lost)."""
    return str(ipaddress.IPv4Address(LOOPBACK_FIRST + seed % LOOPBACK_COUNT))


def trial_group(
    hosts: EmulatedHosts, nodes: int, seed: int, event_loop: EventLoopKind | None
) -> EmulatedGroup:
    """A trial's group: ``nodes`` nodes on the trial's loopback address, every one serving
    STOMP on ``event_loop`` when master (issue 49: chaos on both loops); None: the
    default, ``auto`` (``PRIMACY_STOMP_EVENT_LOOP`` if set, else uvloop)."""
    loop = ("--stomp-event-loop", event_loop) if event_loop is not None else ()
    return EmulatedGroup(
        hosts, nodes, lease_s=LEASE_S, extra=loop, stomp_host=trial_loopback_address(seed)
    )


def run_trial(
    seed: int, workdir: Path, fault: str | None = None, event_loop: EventLoopKind | None = None
) -> TrialResult:
    """One trial with everything drawn from ``seed``; never leaves a process or mount behind.
    ``fault``: inject only this kind (a key of ``FAULTS``), still at random times;
    ``event_loop``: every node's STOMP loop (drawn from nothing: a replay says it again)."""
    rng = random.Random(seed)
    result = TrialResult(seed, rng.choice([2, 3]), [], event_loop or resolve("auto"))
    hosts = EmulatedHosts(workdir)
    mount_tmpfs(hosts.backing, SHARE_SIZE)
    try:
        group = trial_group(hosts, result.nodes, seed, event_loop)
        with (
            MasterPoller(group.nodes.values()) as poller,
            Traffic(group.url, 2, durable_topic=True, request_reply=True) as traffic,
        ):
            try:
                run_faults(group, FAULTS, traffic, rng, result, fault)
            except AssertionError as error:  # a wait timed out: report, still judge the rest
                result.error = str(error)
        result.verdict = check(traffic, group.backing, poller)
    except Exception as error:
        result.error = f"{type(error).__name__}: {error}"
    finally:
        hosts.close()
        subprocess.run(["umount", "-l", str(hosts.backing)], check=False, capture_output=True)
    return result


class ServingGroup(Protocol):
    def wait_until_serving_again(self, timeout_s: float = 60.0) -> NodeProcess: ...


Group = TypeVar("Group", bound=ServingGroup)


def run_faults(
    group: Group,
    faults: Mapping[str, Callable[[Group, random.Random], None]],
    traffic: Traffic,
    rng: random.Random,
    result: TrialResult,
    fault: str | None,
) -> None:
    """One to three faults of ``faults`` (only ``fault`` if given) at random times, each
    ended and the group serving again before the next, with traffic before and after."""
    if not traffic.wait_for_acknowledged(10, _RECOVERY_S):
        raise AssertionError("no traffic acknowledged before the first fault")
    for _ in range(rng.randint(1, 3)):
        time.sleep(rng.uniform(0.0, 1.0))
        name = rng.choice(sorted(faults))
        name = fault or name  # drawn either way: a trial's other draws stay as they were
        result.faults.append(name)
        faults[name](group, rng)
        group.wait_until_serving_again(_RECOVERY_S)
    if not traffic.wait_for_acknowledged(10, _RECOVERY_S):
        raise AssertionError(f"no traffic acknowledged after {result.faults}")
