"""Memory given back after a burst (broker/heap_trim.py): glibc keeps the free pages between
live message bodies as RSS until ``malloc_trim(0)``; a broker asks for it once quiet."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from primacy.broker.config import BrokerConfig
from primacy.broker.heap_trim import HeapTrim
from tests.broker.nodes import Masters, eventually
from tests.broker.stomppy import StompPy

if not os.confstr("CS_GNU_LIBC_VERSION"):
    pytest.skip("malloc_trim is glibc's; this libc is not glibc", allow_module_level=True)

# 100 000 bodies of 1 KiB (above pymalloc's 512 bytes: glibc's heap), one in 64 kept: the
# rest freed leaves the heap a sieve of free pages glibc cannot give back from its top.
_CHILD = r"""
import json
from primacy.broker.heap_trim import glibc_malloc_trim

def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096

bodies = [bytes(1024) + n.to_bytes(4, "little") for n in range(100_000)]
kept = bodies[::64]
del bodies
before = rss()
glibc_malloc_trim()()
print(json.dumps({"before": before, "after": rss(), "kept": len(kept)}))
"""


def test_malloc_trim_gives_back_the_free_pages_between_live_bodies() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True, timeout=60
    )
    figures = json.loads(out.stdout)
    # ~100 MiB of bodies freed but for one in 64: most of it stays as RSS until the trim.
    assert figures["before"] - figures["after"] > 50 << 20, figures


def test_a_broker_trims_after_a_burst_and_after_a_drain(masters: Masters) -> None:
    master = masters.start(BrokerConfig(heap_trim_idle_s=0.2))
    trim = master.service.heap_trim
    assert trim is not None and trim.trims == 0
    producer = StompPy(master.address)
    for n in range(20):
        assert producer.send("/queue/a", "x" * 2048, **{"message-id": f"m-{n}"})
    eventually(lambda: trim.trims == 1, "a trim after the burst")
    consumer = StompPy(master.address)
    consumer.subscribe("/queue/a", "s", ack="auto")
    for _ in range(20):
        consumer.message()
    eventually(lambda: trim.trims == 2, "another after the drain")
    producer.close()
    consumer.close()


def test_one_trim_per_quiet_spell_after_traffic_and_none_without() -> None:
    loop = asyncio.new_event_loop()
    moved = [0]
    trim = HeapTrim(loop, lambda: moved[0], idle_s=3600.0)  # ticks called here, not timed
    try:
        trim._tick()
        trim._tick()
        assert trim.trims == 0  # nothing moved since it was made: nothing to give back
        moved[0] += 5
        trim._tick()  # still moving: not now
        assert trim.trims == 0
        trim._tick()  # quiet after traffic: one trim, on its thread
        eventually(lambda: trim.trims == 1, "the trim's thread")
        trim._tick()
        trim._tick()
        assert trim.trims == 1  # quiet on: no other
    finally:
        trim.stop()
        loop.close()
