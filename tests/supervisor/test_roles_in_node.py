"""The node shell and the role machine's refusals: an event that does not fit the node's state
is logged with its code, changes nothing, and a journal it carries is closed, not leaked."""

from __future__ import annotations

import threading
from typing import cast

import pytest

from primacy.store.journal import JournalStore
from primacy.supervisor import codes
from primacy.supervisor.machine import roles
from primacy.supervisor.shell.node import Node
from tests.harness.group import wait_until


class _Journal:
    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if codes.EVENT_REFUSED in r.getMessage()]


def test_an_event_that_does_not_fit_is_logged_with_its_code_and_changes_nothing(
    slave_node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    slave_node.post(roles.ServingStopped())
    wait_until(lambda: _refusals(caplog), 10, "the refusal to be logged")
    [message] = _refusals(caplog)
    assert "ServingStopped" in message and "state slave" in message
    assert slave_node.snapshot().role == "slave"


def test_a_refused_journal_is_closed(slave_node: Node, caplog: pytest.LogCaptureFixture) -> None:
    journal = _Journal()
    slave_node.post(roles.JournalOpened(cast(JournalStore, journal)))
    assert journal.closed.wait(10), "the refused journal was left open"
    assert any("JournalOpened" in m for m in _refusals(caplog))
    assert slave_node.snapshot().role == "slave"
