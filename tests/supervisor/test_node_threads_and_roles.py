"""Two of a node's duties that only show with whole nodes in one process (the in-memory group).

- A thread's death reaches the node that owns it, however many nodes share the process
  (each node once installed a process-wide ``threading.excepthook`` and restored it, so the
  death went to whichever node had installed its hook last).
- A master's role change out of ``master`` is journaled as the role machine said it: a
  switchover (a graceful step down) as ``demoting``, a stop as ``stopping``.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from primacy.store import tools
from tests.harness.group import wait_until
from tests.harness.memory_group import MemoryGroup


class InjectedBug(RuntimeError):
    pass


def test_a_thread_death_stops_the_node_that_owns_it_and_no_other(
    memory_group: MemoryGroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = memory_group.start("a")
    memory_group.wait_for_master()
    b = memory_group.start("b")  # started last: the process-wide hook of old was b's
    wait_until(lambda: b.role() == "slave", 15, "b to be a slave")

    def broken() -> list[Any]:
        raise InjectedBug("a bug in a's registry read")

    # a's registry thread reads the registry through a's handle only.
    monkeypatch.setattr(a.node._parts.port, "node_entries", broken)
    a.node._parts.registry.wake()
    a.thread.join(15)
    assert not a.alive(), "a, whose thread died, goes on running"
    assert a.exit_codes == [1]
    assert a.role() == "stopped"
    # b, whose threads are all well, serves on: it takes over from a, which stopped.
    assert b.alive() and b.exit_codes == []
    wait_until(b.is_master, 15, "b to take over")


def test_a_switchover_is_journaled_as_the_role_machine_says_it(
    memory_group: MemoryGroup,
) -> None:
    a = memory_group.start("a", admin_token="secret-token")
    memory_group.wait_for_master()
    b = memory_group.start("b")
    wait_until(
        lambda: [m.node_id for m in a.node.snapshot().cluster] == ["a", "b"], 15, "b to register"
    )
    answer = httpx.post(
        f"http://127.0.0.1:{a.port}/switchover",
        headers={"Authorization": "Bearer secret-token"},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text
    wait_until(b.is_master, 15, "b to take over")
    b.stop()
    records: list[dict[str, Any]] = []
    tools.dump(memory_group.journal_root, records.append)
    changes = [
        (r["epoch"], r["event"]["node"], r["event"]["from"], r["event"]["to"], r["event"]["reason"])
        for r in records
        if r["type"] == "CONTROL" and r["event"].get("event") == "role"
    ]
    assert changes[:4] == [  # then a takes over again from b, which stopped
        (1, "a", "acquired", "master", "serving"),
        (1, "a", "master", "demoting", "switchover to b"),
        (2, "b", "acquired", "master", "serving"),
        (2, "b", "master", "stopping", "test over"),
    ]
