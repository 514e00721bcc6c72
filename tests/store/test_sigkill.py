"""SIGKILL a real writer process mid-append, 50 times: every acknowledged record is recovered."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from primacy.store import tools
from primacy.store.recovery import recover
from tests.store.kill_child import payload_for

CHILD = Path(__file__).with_name("kill_child.py")
ROOT = Path(__file__).resolve().parents[2]
THREADS = 4
_ID = re.compile(r"^e(\d+)-t(\d+)-(\d+)$")


def run_and_kill(share: Path, epoch: int, acks_before_kill: int) -> list[str]:
    """Start a writer, let it acknowledge some appends, SIGKILL it; the ids it printed whole."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(share), str(epoch), str(THREADS)],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    acked = []
    try:
        while len(acked) < acks_before_kill:
            line = child.stdout.readline()
            assert line, "the writer process died on its own"
            acked.append(line.decode().strip())
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    rest = child.stdout.read().decode()
    child.stdout.close()
    acked += [line for line in rest.split("\n")[:-1]]  # the last piece may be cut mid-line
    return acked


@pytest.mark.slow
def test_sigkill_of_a_writer_loses_no_acknowledged_record(share: Path) -> None:
    rng = random.Random(1014)
    acked: set[str] = set()
    for epoch in range(1, 51):
        acked |= set(run_and_kill(share, epoch, rng.randint(1, 200)))

        dumped: list[dict[str, Any]] = []
        tools.dump(share, dumped.append)
        records = {r["message_id"]: r["payload"].encode() for r in dumped if r["type"] == "SEND"}
        pending = {
            m for q in recover(share / "journal", log=False).state.pending.values() for m in q
        }
        assert acked <= pending, f"after kill {epoch}: lost {sorted(acked - pending)[:5]}"
        assert pending == set(records)
        for message_id, payload in records.items():
            assert payload == payload_for(message_id)
        # Nothing else: per writer thread, at most the one append in flight beyond its acks.
        acked_count: dict[tuple[int, int], int] = defaultdict(int)
        for message_id in acked:
            e, t, _ = map(int, _ID.match(message_id).groups())  # type: ignore[union-attr]
            acked_count[(e, t)] += 1
        for message_id in pending:
            e, t, n = map(int, _ID.match(message_id).groups())  # type: ignore[union-attr]
            assert n <= acked_count[(e, t)], f"{message_id} recovered but never appended"
