"""A warm standby never passes its gate unless its node holds the current epoch, whatever dies.

Two real supervisors with ``--exec-warm-standby`` share one module (starting them is
the slow part); each test kills or stops one process and checks what the gate did.
The child is the recipe's wrapper script: it marks itself loaded, waits on the gate
with ``python -m primacy.supervisor.child.gate``, then marks itself past the gate with
its epoch and writes to the share. A sampler checks every 10 ms that never two
children past their gates may run at once (as test_activemq_under_primacy.py
samples JVMs). docs/safety.md, "A warm standby behind a gate", is the argument.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from primacy.cli.localgroup import Group, NodeProcess
from tests.harness.claims import lapsed_claim_ends, latest_claim_end
from tests.harness.group import wait_until
from tests.harness.processes import may_run_its_own_code

pytestmark = pytest.mark.slow

KEEP_ALIVE_MS = 1000
# Past its gate the child "recovers" while $READY/hold exists, then is ready (--exec-ready-cmd).
_CHILD = """\
rm -f "$READY/$PRIMACY_NODE_ID"
touch "$MARKS/standby-$PRIMACY_NODE_ID-$$"
EPOCH=$("$PYTHON" -m primacy.supervisor.child.gate) || exit 1
touch "$MARKS/past-$PRIMACY_NODE_ID-$EPOCH-$$"
echo "$PRIMACY_NODE_ID $EPOCH" >> "$PRIMACY_SHARE/warm-writes"
while [ -e "$READY/hold" ]; do sleep 0.05; done
touch "$READY/$PRIMACY_NODE_ID"
exec sleep 3600
"""


@dataclass(frozen=True)
class Mark:
    kind: str  # standby or past
    node_id: str
    pid: int
    epoch: int | None


def _marks(directory: Path) -> list[Mark]:
    found = []
    for path in directory.iterdir():
        kind, node_id, *rest = path.name.split("-")
        epoch = int(rest[0]) if kind == "past" else None
        found.append(Mark(kind, node_id, int(rest[-1]), epoch))
    return found


def _runs(pid: int) -> bool:
    return psutil.pid_exists(pid) and may_run_its_own_code(pid)


@dataclass
class GatesWatch:
    """Samples the children past their gates that may still run."""

    marks: Path
    overlaps: list[tuple[Mark, ...]] = field(default_factory=list)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def past_and_running(self) -> list[Mark]:
        return [m for m in _marks(self.marks) if m.kind == "past" and _runs(m.pid)]

    def standing_by(self, node_id: str) -> list[Mark]:
        """The node's loaded children that wait behind their gates."""
        passed = {m.pid for m in _marks(self.marks) if m.kind == "past"}
        return [
            m
            for m in _marks(self.marks)
            if m.kind == "standby" and m.node_id == node_id and m.pid not in passed
            if _runs(m.pid)
        ]

    def run(self) -> None:
        while not self._stop.is_set():
            running = self.past_and_running()
            self.samples += 1
            if len(running) > 1:
                self.overlaps.append(tuple(running))
            time.sleep(0.01)


@dataclass
class WarmPair:
    group: Group
    marks: Path
    watch: GatesWatch
    share: Path
    ready: Path

    def start(self, node_id: str) -> NodeProcess:
        return self.group.start(
            node_id,
            "--lock-keep-alive-period-ms",
            str(KEEP_ALIVE_MS),
            "--exec-warm-standby",
            "--exec-ready-cmd",
            f"test -e {self.ready / node_id}",
            exec_command=["sh", "-c", _CHILD],
            env={"MARKS": str(self.marks), "PYTHON": sys.executable, "READY": str(self.ready)},
        )

    def settled(self) -> tuple[NodeProcess, Mark, NodeProcess, Mark]:
        """Both nodes up: one master with its child past the gate, one standing by."""
        for node_id in ("n1", "n2"):
            if not self.group.nodes[node_id].alive():
                self.start(node_id)
        master = self.group.wait_for_master(60)
        slave = next(n for n in self.group.nodes.values() if n is not master)
        past: list[Mark] = []
        waiting: list[Mark] = []

        def ready() -> bool:
            past[:] = [m for m in self.watch.past_and_running() if m.node_id == master.node_id]
            waiting[:] = self.watch.standing_by(slave.node_id)
            return len(past) == 1 and len(waiting) == 1

        wait_until(ready, 60, "a master past its gate and a standby behind one")
        return master, past[0], slave, waiting[0]

    def passed(self) -> set[tuple[str, int | None]]:
        return {(m.node_id, m.epoch) for m in _marks(self.marks) if m.kind == "past"}

    def check(self) -> None:
        assert self.watch.samples > 10
        assert self.watch.overlaps == [], f"two children past their gates: {self.watch.overlaps}"
        by_epoch: dict[int | None, set[str]] = {}
        for node_id, epoch in self.passed():
            by_epoch.setdefault(epoch, set()).add(node_id)
        assert all(len(nodes) == 1 for nodes in by_epoch.values()), by_epoch


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmPair]:
    root = tmp_path_factory.mktemp("warm")
    share, marks, logs, ready = (root / name for name in ("share", "marks", "logs", "ready"))
    for directory in (share, marks, logs, ready):
        directory.mkdir()
    group = Group(share=share, log_dir=logs)
    watch = GatesWatch(marks)
    sampler = threading.Thread(target=watch.run, daemon=True)
    sampler.start()
    made = WarmPair(group, marks, watch, share, ready)
    try:
        made.start("n1")
        group.wait_for_master(60)  # n1 first: the one that serves
        made.start("n2")
        yield made
    finally:
        watch._stop.set()
        sampler.join(5)
        group.close()
        for mark in _marks(marks):  # a child a killed guardian left (none, if all is well)
            if psutil.pid_exists(mark.pid):
                os.kill(mark.pid, signal.SIGKILL)


def _guardian(node: NodeProcess) -> psutil.Process:
    for process in psutil.Process(node.pid).children():
        if "primacy.supervisor.child.guardian" in " ".join(process.cmdline()):
            return process
    raise AssertionError(f"{node.node_id} has no guardian")


def _status(node: NodeProcess) -> dict[str, object]:
    answer: dict[str, object] = httpx.get(f"http://127.0.0.1:{node.port}/status", timeout=5).json()
    return answer


def _epoch(node: NodeProcess) -> int:
    epoch = _status(node)["epoch"]
    assert isinstance(epoch, int)
    return epoch


def test_the_slave_stays_behind_its_gate_and_the_master_passed_once(pair: WarmPair) -> None:
    master, past, _, _ = pair.settled()
    assert past.epoch == _epoch(master)
    assert {node for node, _ in pair.passed()} == {master.node_id}
    writes = (pair.share / "warm-writes").read_text().splitlines()
    assert writes == [f"{master.node_id} {past.epoch}"]
    pair.check()


def test_a_killed_supervisor_s_child_dies_before_the_standby_passes(pair: WarmPair) -> None:
    master, past, slave, waiting = pair.settled()
    master.signal(signal.SIGKILL)
    wait_until(slave.is_master, 30, "the standby's node to take over")
    # The standby that was loaded is the one that goes through its gate: no new start.
    wait_until(
        lambda: waiting.pid in {m.pid for m in pair.watch.past_and_running()},
        10,
        "the loaded standby to pass its gate",
    )
    assert not _runs(past.pid)
    pair.check()


def test_a_killed_standby_guardian_never_opens_the_gate(pair: WarmPair) -> None:
    master, past, slave, waiting = pair.settled()
    before = pair.passed()
    _guardian(slave).kill()
    wait_until(lambda: not _runs(waiting.pid), 10, "the gated child to die with its guardian")
    wait_until(lambda: pair.watch.standing_by(slave.node_id), 30, "a fresh standby")
    assert pair.passed() == before, "a standby passed its gate because its guardian died"
    assert _runs(past.pid) and master.is_master()
    pair.check()


def test_a_killed_standby_supervisor_never_opens_the_gate(pair: WarmPair) -> None:
    _, _, slave, waiting = pair.settled()
    before = pair.passed()
    slave.signal(signal.SIGKILL)
    wait_until(lambda: not _runs(waiting.pid), 10, "the gated child to die with its supervisor")
    assert pair.passed() == before, "a standby passed its gate because its supervisor died"
    pair.check()


@pytest.mark.parametrize("victim", ["guardian", "child"])
def test_a_killed_master_guardian_or_child_restarts_behind_an_opened_gate(
    pair: WarmPair, victim: str
) -> None:
    master, past, slave, _ = pair.settled()
    epoch = _epoch(master)
    if victim == "guardian":
        _guardian(master).kill()
    else:
        os.kill(past.pid, signal.SIGKILL)
    wait_until(
        lambda: any(m.pid != past.pid for m in pair.watch.past_and_running()),
        30,
        f"a new child past its gate after the {victim} was killed",
    )
    [now_past] = pair.watch.past_and_running()
    # The same master restarted its child under its epoch, or (had it given the lock up)
    # the other node took over; never the standby on its own.
    assert (now_past.node_id, now_past.epoch) == (master.node_id, epoch) or (
        now_past.node_id == slave.node_id and now_past.epoch != epoch
    )
    pair.check()


def test_a_stopped_master_supervisor_s_child_dies_and_no_standby_passes(pair: WarmPair) -> None:
    master, past, _, waiting = pair.settled()
    before = pair.passed()
    kills_before = len(lapsed_claim_ends(master.log()))
    master.signal(signal.SIGSTOP)
    try:
        stopped_at = time.monotonic()
        wait_until(lambda: not _runs(past.pid), 10, "the past child to die with the claim")
        # Killed on the claim of the last lease check before SIGSTOP (tests/harness/claims.py
        # argues the bound), not by anything slower: the guardian says which claim.
        wait_until(
            lambda: len(lapsed_claim_ends(master.log())) > kills_before, 10, "the kill's line"
        )
        claim_end = lapsed_claim_ends(master.log())[kills_before]
        assert claim_end <= latest_claim_end(stopped_at, KEEP_ALIVE_MS / 1000), claim_end
        # The stopped supervisor still holds the lock on this local share: nobody takes over,
        # and the standby stays where it is.
        assert _runs(waiting.pid) and pair.passed() == before
    finally:
        master.signal(signal.SIGCONT)
    pair.settled()
    pair.check()


def test_master_answers_503_until_the_child_past_its_gate_is_ready(pair: WarmPair) -> None:
    master, _, slave, waiting = pair.settled()
    (pair.ready / "hold").touch()
    try:
        master.signal(signal.SIGKILL)
        wait_until(
            lambda: waiting.pid in {m.pid for m in pair.watch.past_and_running()},
            30,
            "the standby to pass its gate",
        )
        wait_until(lambda: _status(slave)["role"] == "master", 30, "the promotion")
        assert slave.status("/master") == 503
        assert "readiness" in str(_status(slave)["waiting_for"])
    finally:
        (pair.ready / "hold").unlink()
    wait_until(slave.is_master, 30, "the new master to be ready")
    pair.check()
