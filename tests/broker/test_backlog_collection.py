"""A backlog costs the garbage collector nothing to scan (broker/queues.py, ``HeldMessage``).

A full collection holds the interpreter lock for as long as it scans the objects it tracks; the
lease check cannot run meanwhile, and a check that outlasts the keepalive stops the master. Held
as objects the collector tracks, a backlog of 180 000 messages made those scans 260 ms long and
stopped a master under its own backlog (docs/benchmarks.md, "The soak to a million"). Held as
plain tuples, what the collector tracks stays the same however many messages wait: bodies in
memory, bodies left in the journal (past ``max_body_memory_bytes``), and messages recovered by
the next master.
"""

from __future__ import annotations

import gc

from primacy.broker.config import BrokerConfig
from tests.broker.nodes import Masters, eventually
from tests.broker.stomppy import StompPy

MESSAGES = 2_000


def tracked_after_full_collections() -> int:
    # Twice: a tuple holding tuples is untracked once those inside it are.
    gc.collect()
    gc.collect()
    return len(gc.get_objects())


def test_a_backlog_adds_nothing_to_what_a_full_collection_scans(masters: Masters) -> None:
    # Half the bodies over the memory limit: those wait as journal locations.
    config = BrokerConfig(max_body_memory_bytes=MESSAGES // 2 * 1024)
    master = masters.start(config)
    client = StompPy(master.address)
    assert client.send("/queue/warm", "x")  # the connection's own objects, before counting
    before = tracked_after_full_collections()
    for number in range(MESSAGES - 1):
        client.connection.send("/queue/backlog", bytes(1024), headers={"n": str(number)})
    assert client.send("/queue/backlog", bytes(1024))  # receipted after every earlier SEND
    eventually(lambda: master.service.stats()["messages_ready"] == MESSAGES + 1, "the backlog")
    held = tracked_after_full_collections()
    client.close()
    # Two tracked objects a message before (the queue's and the journal state's): 4 000 more.
    # Now a few; the margin is for the objects of a new master's own (~170 after the takeover).
    assert held - before < MESSAGES // 4, (before, held)

    successor = masters.failover(master)
    eventually(lambda: successor.service.stats()["messages_ready"] == MESSAGES + 1, "recovery")
    recovered = tracked_after_full_collections()
    assert recovered - before < MESSAGES // 4, (before, recovered)
