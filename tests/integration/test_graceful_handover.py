"""A graceful handover skips the takeover wait; a crash never does.

A master stopped gracefully (SIGTERM, a switchover) stops claiming the role,
marks its epoch record released, then lets the lock go: the next master has
no claim to outlast and serves as soon as its journal is open. After a crash
it cannot know whether the old master still claims, so it waits
(docs/safety.md, "A graceful handover has nothing to outlast").
"""

from __future__ import annotations

import signal
import time

import pytest

from primacy.locker.epoch import EpochRegistry
from tests.harness.group import Group, MasterPoller, wait_until

pytestmark = pytest.mark.slow

TAKEOVER_DELAY_MS = 3000  # long, so skipping it or not is plain to see
ARGS = ("--takeover-delay-ms", str(TAKEOVER_DELAY_MS))


def test_sigterm_hands_over_without_the_wait_and_sigkill_keeps_it(group: Group) -> None:
    a = group.start("a", *ARGS)
    wait_until(a.is_master, 20, "a to serve")
    b = group.start("b", *ARGS)
    wait_until(lambda: b.status("/slave") == 200, 20, "b to be a slave")
    with MasterPoller([a, b]) as poller:
        stopped_at = time.monotonic()
        a.signal(signal.SIGTERM)
        wait_until(b.is_master, 20, "b to take over", interval_s=0.005)
        handover_s = time.monotonic() - stopped_at
        a.process.wait(15)
        a = group.start("a", *ARGS)
        poller.add(a)
        wait_until(lambda: a.status("/slave") == 200, 20, "a to be a slave again")
        killed_at = time.monotonic()
        b.signal(signal.SIGKILL)
        wait_until(a.is_master, 30, "a to take over", interval_s=0.005)
        takeover_s = time.monotonic() - killed_at
    assert poller.two_masters() == []
    assert handover_s < TAKEOVER_DELAY_MS / 1000 / 2, handover_s
    assert takeover_s >= TAKEOVER_DELAY_MS / 1000, takeover_s
    records = EpochRegistry(group.share)
    assert records.read(1)["released"] is True  # a's graceful stop
    assert "released" not in records.read(2)  # b was killed
