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
from primacy.store.state import MESSAGE_ID
from tests.harness.cli import primacy
from tests.harness.crafted_files import with_record_field

PLANTED_EPOCH = 5
UNKNOWN_TYPE_ID = b"stored-as-type-9"
# What each crafted record holds, and words of the reason the tools must give.
CRAFTED = {
    # A SEND whose type byte _plant rewrites to 9 (EncodedRecord takes a RecordType only).
    "unknown record type": (
        fmt.EncodedRecord(fmt.RecordType.SEND, 0, b"/queue/q", UNKNOWN_TYPE_ID),
        "unknown type 9",
    ),
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
    if record.message_id == UNKNOWN_TYPE_ID:
        batch = with_record_field(batch, 0, "record_type", 9)
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
        (planted_send,) = [m for m in state.pending["/queue/q"].values() if m[MESSAGE_ID] == "x"]
        with pytest.raises(JournalError, match="not ours"):
            store.read_message(planted_send)
        assert store.read_message(state.pending["/queue/q"]["real"]).payload == b"kept"
    by_reason = {why: name for name, why in planted.items()}
    for reason in ("unknown type 9", "destination is not UTF-8"):
        assert reason in damaged[by_reason[reason]]


@pytest.mark.parametrize("command", ["verify", "dump", "stats"])
def test_the_journal_tools_name_each_crafted_batch_and_exit_1(
    crafted_share: tuple[Path, dict[str, str]], command: str
) -> None:
    share, planted = crafted_share
    result = primacy("journal", command, str(share))
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


def _overlapping_claims(region_len: int) -> bytes:
    """A damaged region crafted to make a resync quadratic: a batch header every 48 bytes,
    each well-formed and claiming to run to the region's end, none with a valid CRC."""
    assert region_len % 48 == 0
    region = bytearray(region_len)
    for offset in range(0, region_len, 48):
        batch_len = region_len - offset
        heap_len = batch_len - fmt.BATCH_HEADER_LEN - fmt.RECORD_HEADER_LEN
        if heap_len < 0:
            break  # the last few: too short to claim anything
        region[offset : offset + 48] = fmt._BATCH_HEADER.pack(
            fmt.BATCH_MAGIC, 0, batch_len, 1, PLANTED_EPOCH, 1, 0, heap_len,
            fmt.RECORD_HEADER_LEN, 0,
        )  # fmt: skip
    return bytes(region)


def test_a_crafted_region_costs_the_scan_linear_work_and_is_reported(
    share: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by trying: such a region of 4 MB kept ``journal verify`` busy for hours, every
    header's claim CRC-checked to the end. The search past damage now stops after twice the
    segment's size of checks and says so; the CRC work is counted with the real function."""
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "real", b"kept", {}).result()
    name = segment_name(PLANTED_EPOCH, 2)
    header = fmt.encode_segment_header(
        fmt.SegmentHeader(PLANTED_EPOCH, 2, "planter", time.time_ns())
    )
    region = _overlapping_claims(48 * 20_000)  # ~1 MB; a full check of every claim: ~19 GB
    segment = header + region
    (share / "journal" / name).write_bytes(segment)
    # A later segment: the crafted one is sealed, its damage no torn tail.
    _plant(share / "journal", 3, fmt.EncodedRecord(fmt.RecordType.SEND, 0, b"/queue/q", b"after"))

    checked = [0]
    real_crc = fmt.crc32c.crc32c

    def counting_crc(data: bytes | memoryview, value: int = 0) -> int:
        checked[0] += len(data)
        return real_crc(data, value)

    monkeypatch.setattr(fmt.crc32c, "crc32c", counting_crc)
    from primacy.store.recovery import recover

    report = recover(share / "journal", use_checkpoint=False, log=False).report
    damage = [d for d in report.damaged if d.segment == name]
    assert damage and "not searched further" in damage[-1].reason
    assert damage[0].offset == len(header)
    # The region's first claim (1x), the first-batch fence read (1x), the search (a budget of
    # 2x + 1 MiB, and the claim that overran it, 1x): linear. Checking every claim: ~19 GB.
    assert checked[0] <= 5 * len(segment) + (1 << 20) + 10_000
    monkeypatch.undo()
    assert sorted(recover_pending(share)) == ["after", "real"]
    verified = primacy("journal", "verify", str(share))
    assert verified.returncode == 1 and "Traceback" not in verified.stderr
    assert name in verified.stdout + verified.stderr


def recover_pending(share: Path) -> list[str]:
    from primacy.store.recovery import recover

    state = recover(share / "journal", log=False).state
    return [message_id for messages in state.pending.values() for message_id in messages]


_PEAK_RSS_OF_THE_TOOL = """
import resource, runpy, sys
sys.argv = ["primacy", "journal", *sys.argv[1:]]
try:
    runpy.run_module("primacy.cli", run_name="__main__")
except SystemExit as exit:
    code = exit.code
print("peak-kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def _tool_peak_kib(command: str, share: Path) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_OF_THE_TOOL, command, str(share)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    peak = [line for line in result.stderr.splitlines() if line.startswith("peak-kib")]
    assert peak, result.stderr
    return int(peak[-1].split()[1]), result.stdout + result.stderr


@pytest.mark.parametrize("command", ["verify", "stats"])
def test_the_journal_tools_read_a_huge_segment_in_bounded_memory(
    share: Path, tmp_path: Path, command: str
) -> None:
    """Found by trying: a 1 GiB segment cost the tools 1 GB of memory, read whole. Here a
    planted 512 MiB segment (sparse: its bytes are zeros, past a valid header) must cost the
    tool less than 64 MiB more than the same journal without it."""
    config = StoreConfig(share=share, node_id="a")
    with JournalStore.open(config, epoch=1, fencing_check=lambda: None) as store:
        store.append_send("/queue/q", "real", b"kept", {}).result()
    baseline_kib, _ = _tool_peak_kib(command, share)
    name = segment_name(PLANTED_EPOCH, 2)
    header = fmt.encode_segment_header(
        fmt.SegmentHeader(PLANTED_EPOCH, 2, "planter", time.time_ns())
    )
    _plant(share / "journal", 3, fmt.EncodedRecord(fmt.RecordType.SEND, 0, b"/queue/q", b"after"))
    with (share / "journal" / name).open("wb") as planted:
        planted.write(header)
        planted.truncate(512 * 1024 * 1024)
    peak_kib, output = _tool_peak_kib(command, share)
    # verify names the segment; stats counts it and points to verify
    assert (name if command == "verify" else "damaged_batches: 1") in output
    assert peak_kib - baseline_kib < 64 * 1024, (baseline_kib, peak_kib)


@pytest.mark.parametrize("command", ["verify", "dump", "stats"])
def test_the_journal_tools_fail_on_a_missing_share(tmp_path: Path, command: str) -> None:
    """Found by trying: ``journal verify /does-not-exist`` said ok and exited 0."""
    result = primacy("journal", command, str(tmp_path / "does-not-exist"))
    assert result.returncode != 0
    assert "does-not-exist" in result.stderr and "Traceback" not in result.stderr
