"""A journal of crafted damage, to hold recovery, `journal verify` and the replay to one verdict.

Every batch is written with the store's encoder; the damage is what an attacker with
write access to the share, or a crash, makes of it: CRC-valid batches whose record
lengths do not add up (one mid-segment, one running past the end of its segment, as
issue 43 found), records of a foreign epoch or sequence, an unknown type, text that is
not UTF-8, a batch cut short in a sealed segment and at an epoch's tail, a stale
master's writes past a fence (one of them not ours either) and a segment no fence
lists; and, per variant, a checkpoint naming a segment that does not exist, or one
larger than any journal this size can need, each with a fence table that would fence
every segment.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from primacy.store import format as fmt
from primacy.store import payloads
from primacy.store.checkpoint import checkpoint_name
from primacy.store.segments import segment_name
from tests.harness.crafted_files import checkpoint_bytes, record_field, with_record_field

CHECKPOINT_VARIANTS = ("none", "missing segment", "oversized")
# Past the bound recovery puts on a checkpoint of a journal this small (64 MiB and 16 times
# the segments).
_OVERSIZED_BYTES = 65 * 2**20


@dataclass
class Corpus:
    """A share and where each crafted batch lies: name -> (segment, offset)."""

    share: Path
    crafted: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def journal(self) -> Path:
        return self.share / "journal"


class _Segment:
    def __init__(self, corpus: Corpus, epoch: int, first_sequence: int) -> None:
        self.corpus, self.epoch = corpus, epoch
        self.name = segment_name(epoch, first_sequence)
        header = fmt.SegmentHeader(epoch, first_sequence, f"node-{epoch}", time.time_ns())
        self.data = bytearray(fmt.encode_segment_header(header))

    def add(self, batch: bytes, what: str | None = None) -> None:
        if what is not None:
            self.corpus.crafted[what] = (self.name, len(self.data))
        self.data += batch

    def write(self) -> int:
        (self.corpus.journal / self.name).write_bytes(bytes(self.data))
        return len(self.data)


def _sends(epoch: int, first: int, count: int, destination: bytes = b"/queue/q") -> bytes:
    records = [
        fmt.EncodedRecord(
            fmt.RecordType.SEND, time.time_ns(), destination, f"m{first + i}".encode(), b"", b"p"
        )
        for i in range(count)
    ]
    return fmt.encode_batch(epoch, first, time.time_ns(), records)


def _fence(epoch: int, first: int, entries: list[payloads.FenceEntry]) -> bytes:
    record = fmt.EncodedRecord(
        fmt.RecordType.FENCE, time.time_ns(), payload=payloads.encode_fence(entries)
    )
    return fmt.encode_batch(epoch, first, time.time_ns(), [record])


def _lengths_off(batch: bytes, by: int) -> bytes:
    """The last record's payload claims ``by`` bytes more than the heap holds."""
    last = fmt.batch_header_at(memoryview(batch)).record_count - 1
    length = record_field(batch, last, "payload_len")
    return with_record_field(batch, last, "payload_len", length + by)


def write_corpus(share: Path, checkpoint: str = "none") -> Corpus:
    corpus = Corpus(share)
    corpus.journal.mkdir(parents=True)
    # Epoch 1: every kind of batch whose CRC holds over records we never wrote.
    a = _Segment(corpus, 1, 1)
    a.add(_sends(1, 1, 2))
    a.add(_lengths_off(_sends(1, 3, 2), 8), "lengths that do not add up")
    a.add(_sends(1, 5, 2))
    a.add(with_record_field(_sends(1, 7, 1), 0, "epoch", 9), "a record of a foreign epoch")
    a.add(with_record_field(_sends(1, 8, 1), 0, "sequence", 99), "a record of another sequence")
    a.add(with_record_field(_sends(1, 9, 2), 1, "sequence", 9), "a sequence repeated")
    a.add(with_record_field(_sends(1, 11, 1), 0, "record_type", 9), "an unknown record type")
    a.add(_sends(1, 12, 1, destination=b"/queue/\xff"), "a destination not UTF-8")
    a.add(_sends(1, 2**63, 1), "a sequence no node reaches")
    a.add(_sends(1, 13, 2))
    fenced_at = len(a.data)
    a.add(_sends(1, 15, 1), "a stale master's write past the fence")
    a.add(_lengths_off(_sends(1, 16, 1), 16), "a stale master's batch not ours either")
    a_len = a.write()
    # A segment the stale master made after the fence: no fence lists it.
    b = _Segment(corpus, 1, 17)
    b.add(_sends(1, 17, 2), "a segment no fence lists")
    b_len = b.write()
    # Epoch 2: its fence, then a batch cut short in what becomes a sealed segment; its last
    # segment ends in a batch whose lengths run past the end of the file.
    c = _Segment(corpus, 2, 15)
    c.add(_fence(2, 15, [payloads.FenceEntry(1, 1, fenced_at)]))
    c.add(_sends(2, 16, 2))
    c.add(_sends(2, 18, 3)[:-20], "a batch cut short in a sealed segment")
    c_len = c.write()
    d = _Segment(corpus, 2, 21)
    d.add(_sends(2, 21, 2))
    d.add(_lengths_off(_sends(2, 23, 2), 700), "lengths running past the segment's end")
    d_len = d.write()
    # Epoch 3: its fence (epoch 1's second segment is not listed), and a torn tail.
    e = _Segment(corpus, 3, 25)
    listed = [(1, 1, fenced_at), (2, 15, c_len), (2, 21, d_len)]
    e.add(_fence(3, 25, [payloads.FenceEntry(*entry) for entry in listed]))
    e.add(_sends(3, 26, 2))
    e.add(_sends(3, 28, 2)[:30], "a torn tail")
    e_len = e.write()
    sizes = {a.name: a_len, b.name: b_len, c.name: c_len, d.name: d_len, e.name: e_len}
    if checkpoint != "none":
        _plant_checkpoint(corpus, checkpoint, sizes)
    return corpus


def _plant_checkpoint(corpus: Corpus, variant: str, sizes: dict[str, int]) -> None:
    """A CRC-valid checkpoint newer than any, whose fence table (a fence of epoch 4 listing
    nothing) would fence every segment, unusable for ``variant``'s reason alone."""
    positions = [[name, size, True] for name, size in sizes.items()]
    if variant == "missing segment":
        positions.append([segment_name(3, 40), 4096, False])
    body = {
        "epoch": 4,
        "state": {
            "last_sequence": 29,
            "dedupe_window_messages": 10,
            "destinations": [],
            "segments": [],
            "pending": {
                "destination": [],
                "message_id": [],
                "sequence": [],
                "segment": [],
                "batch_offset": [],
            },
            "seen": {"destination": [], "message_id": [], "sequence": []},
        },
        "positions": positions,
        "fences": {"fence_epochs": [4], "limits": []},
    }
    text = json.dumps(body).encode()
    if variant == "oversized":
        text += b" " * (_OVERSIZED_BYTES - len(text))
    directory = corpus.journal / "checkpoints"
    directory.mkdir(exist_ok=True)
    (directory / checkpoint_name(10**6, 4)).write_bytes(checkpoint_bytes(text))
