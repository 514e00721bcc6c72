"""No escape sequence planted on the share reaches the terminal of an operator who runs the CLI
(issue 27, finding 14: an OSC title change from ``nodes/*.json`` worked through ``primacy
cluster --share`` and ``primacy status --share``). Real ``primacy`` commands over a share
with planted text; what they print is checked byte by byte."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from primacy.share.layout import ShareLayout
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from tests.harness.cli import primacy

# OSC (retitle the window), CSI (clear the screen), CR (rewrite the line), a C1 CSI, BEL,
# and a right-to-left override that reorders what follows.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r\x9b31m\u202eevil"
# Anything a terminal acts on rather than shows, except the newlines that end lines.
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _plant(share: Path) -> None:
    layout = ShareLayout(share)
    layout.nodes.mkdir()
    entry = {
        "node_id": HOSTILE,
        "host": HOSTILE,
        "pid": 1,
        "http": HOSTILE,
        "priority": HOSTILE,
        "role": HOSTILE,
        "epoch": 1,
        "updated_unix_s": time.time(),
    }
    (layout.nodes / "evil.json").write_text(json.dumps(entry))
    holder = {"node_id": HOSTILE, "host": HOSTILE, "pid": 1, "since_unix_s": 1.0, "epoch": 1}
    layout.lock_file.write_text(json.dumps(holder))


@pytest.mark.parametrize(
    "command",
    [("cluster", "--share"), ("status", "--share")],
    ids=["cluster", "status"],
)
def test_planted_registry_and_holder_text_reaches_the_terminal_escaped(
    share: Path, command: tuple[str, str]
) -> None:
    _plant(share)
    result = primacy(*command, str(share))
    # The planted entry is no master: status says no node serves (6, EXIT_NO_MASTER).
    assert result.returncode == (6 if command[0] == "status" else 0), result.stderr
    shown = result.stdout + result.stderr
    assert not _CONTROL.search(shown), repr(shown)
    assert "\\x1b]0;pwned\\x07" in result.stdout  # shown, as escapes


def test_a_journal_dump_shows_a_planted_destination_escaped(share: Path) -> None:
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send(f"/queue/{HOSTILE}", HOSTILE, b"body", {}).result()
    result = primacy("journal", "dump", str(share))
    assert result.returncode == 0, result.stderr
    assert not _CONTROL.search(result.stdout + result.stderr), repr(result.stdout)
    assert "\\x1b[2J" in result.stdout
