"""Batches whose CRC holds but whose records we never wrote: recovery skips and reports them,
and ``primacy journal verify|dump|stats`` name the segment, the offset and the reason and exit 1,
never with a traceback (found by trying: record type 9 and invalid UTF-8 ended in tracebacks)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from primacy.store import format as fmt
from primacy.store.config import StoreConfig
from primacy.store.errors import JournalError
from primacy.store.journal import JournalStore
from primacy.store.segments import segment_name

PLANTED_EPOCH = 5
# What each crafted record holds, and words of the reason the tools must give.
CRAFTED = {
    "unknown record type": (fmt.EncodedRecord(9, 0, b"/queue/q", b"x"), "unknown type 9"),  # type: ignore[arg-type]
    "destination not UTF-8": (
        fmt.EncodedRecord(fmt.RecordType.SEND, 0, b"/queue/\xff", b"x"),
        "destination is not UTF-8",
    ),
    "headers cut short": (
        fmt.EncodedRecord(fmt.RecordType.SEND, 0, b"/queue/q", b"x", b"\x05\x00ab"),
        "header",
    ),
    "control not JSON": (
        fmt.EncodedRecord(fmt.RecordType.CONTROL, 0, payload=b"{" * 100_000),
        "not JSON",
    ),
    "fence cut short": (
        fmt.EncodedRecord(fmt.RecordType.FENCE, 0, payload=b"\x07\x00\x00\x00\x00\x00\x00\x00"),
        "FENCE record",
    ),
}


def _plant(journal: Path, first_sequence: int, record: fmt.EncodedRecord) -> str:
    """A segment of a later epoch with one whole (CRC-valid) batch holding ``record``."""
    name = segment_name(PLANTED_EPOCH, first_sequence)
    header = fmt.encode_segment_header(
        fmt.SegmentHeader(PLANTED_EPOCH, first_sequence, "planter", time.time_ns())
    )
    batch = fmt.encode_batch(PLANTED_EPOCH, first_sequence, time.time_ns(), [record])
    (journal / name).write_bytes(header + batch)
    return name


@pytest.fixture
def crafted_share(share: Path) -> tuple[Path, dict[str, str]]:
    """A journal with one real pending message, and one planted segment per crafted batch."""
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "real", b"kept", {"h": "v"}).result()
    planted = {
        _plant(config.journal_dir, 1000 * (index + 1), record): reason
        for index, (record, reason) in enumerate(CRAFTED.values())
    }
    return share, planted


def test_recovery_skips_and_reports_crafted_batches(crafted_share: tuple[Path, dict[str, str]]):
    share, planted = crafted_share
    config = StoreConfig(share=share, node_id="b")
    with JournalStore.open(config, epoch=PLANTED_EPOCH + 1, fencing_check=lambda: None) as store:
        damaged = {d.segment: d.reason for d in store.recovery.report.damaged}
        state = store.recovery.state
        # Recovery reads keys only: the SEND whose headers are cut short looks pending, and
        # reading it back (what delivery does) is a JournalError the broker logs, not a crash.
        (planted_send,) = [m for m in state.pending["/queue/q"].values() if m.message_id == "x"]
        with pytest.raises(JournalError, match="not ours"):
            store.read_message(planted_send)
        assert store.read_message(state.pending["/queue/q"]["real"]).payload == b"kept"
    by_reason = {why: name for name, why in planted.items()}
    for reason in ("unknown type 9", "destination is not UTF-8"):
        assert reason in damaged[by_reason[reason]]


def _journal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "primacy.cli", "journal", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["verify", "dump", "stats"])
def test_the_journal_tools_name_each_crafted_batch_and_exit_1(
    crafted_share: tuple[Path, dict[str, str]], command: str
) -> None:
    share, planted = crafted_share
    result = _journal(command, str(share))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    if command == "stats":
        assert (
            "damaged_batches: 2" in result.stdout
        )  # what recovery sees: keys only and "journal verify" in result.stderr
        return
    for name, reason in planted.items():
        [line] = [line for line in output.splitlines() if name in line]
        assert reason in line and "at byte" in line, line
    if command == "dump":
        assert "real" in result.stdout  # the real record is still dumped
