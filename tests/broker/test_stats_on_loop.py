"""The broker's figures are read on its own loop and nowhere else, and asking never raises.

Its books (queues, peers, backlog) change on the loop; a dict read from another thread
while it changes size raises ``RuntimeError``, which would end the thread that asked (the
registry's stats thread, and with it the node). A busy loop that does not answer in time
gives the figures last read there; a figure that fails to compute does too, and the broker
serves on.
"""

from __future__ import annotations

import threading
import time

import pytest

from primacy.broker import service as service_module
from primacy.broker.queues import QueueBook
from tests.broker.nodes import Masters, RawClient


def _readers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that read the broker's queue book for its figures."""
    seen: list[str] = []
    count = QueueBook.ready_count

    def recorded(book: QueueBook) -> int:
        seen.append(threading.current_thread().name)
        return count(book)

    monkeypatch.setattr(QueueBook, "ready_count", recorded)
    return seen


def test_a_busy_loop_gives_the_last_figures_and_nothing_reads_its_books_elsewhere(
    masters: Masters, monkeypatch: pytest.MonkeyPatch
) -> None:
    master = masters.start()
    readers = _readers(monkeypatch)
    fresh = master.service.stats()
    assert fresh["running"] is True
    monkeypatch.setattr(service_module, "_STATS_TIMEOUT_S", 0.2)
    loop = master.service._loop
    assert loop is not None
    release = threading.Event()
    loop.call_soon_threadsafe(release.wait, 5)  # the loop is busy for a while
    try:
        late = master.service.stats()
    finally:
        release.set()
    assert late == fresh  # the last figures read on the loop
    time.sleep(0.2)  # the late read, once the loop is free, runs there
    assert set(readers) == {"primacy-broker"}, readers


def test_a_figure_that_fails_leaves_the_broker_serving_and_the_caller_standing(
    masters: Masters, monkeypatch: pytest.MonkeyPatch
) -> None:
    master = masters.start()
    fresh = master.service.stats()

    def changed_size(book: QueueBook) -> int:
        raise RuntimeError("dictionary changed size during iteration")

    monkeypatch.setattr(QueueBook, "ready_count", changed_size)
    figures = master.service.stats()  # raises nothing
    assert figures == fresh and figures["running"] is True
    monkeypatch.undo()
    client = RawClient(master.address)  # still listening: the loop did not stop on it
    assert client.connect().command == "CONNECTED"
    client.close()
    assert master.service.stats()["running"] is True
