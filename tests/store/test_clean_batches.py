"""The store's vectorised batch check accepts exactly what its scan finds clean (no Spark).

``clean_batches`` may only say "clean" where ``store.segments.scan_segment``
finds every byte a valid batch ending within the fence, and must then list the
same batches; anything else it hands back (None) for the scan to classify.
Checked against the scan on a real segment under every kind of change: a bit
flipped every few bytes, the file cut at every batch-aligned length, fences
at every batch boundary and inside batches.
"""

from __future__ import annotations

import pytest

from primacy.store import format as fmt
from primacy.store.columns import clean_batches
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from primacy.store.segments import SegmentRef, list_segments, scan_segment


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> tuple[SegmentRef, bytes]:
    share = tmp_path_factory.mktemp("share")
    store = JournalStore.open(
        StoreConfig(share=share, node_id="node-a"), epoch=1, fencing_check=lambda: None
    )
    for i in range(40):  # one batch each: many small batches, as under load
        store.append_send(f"q{i % 3}", f"id-{i}", b"x" * (i * 7), {"n": str(i)}).result(timeout=5)
    store.close()
    (ref,) = list_segments(share / "journal")
    return ref, ref.path.read_bytes()


def agrees_with_the_scan(ref: SegmentRef, data: bytes, fence_limit: int | None = None) -> bool:
    """Whether clean_batches says clean exactly where the scan does, with the same batches."""
    scan = scan_segment(ref, data, fence_limit=fence_limit, is_epoch_tail=True)
    scan_clean = scan.header is not None and not scan.damage and scan.fenced_offset is None
    if scan.header is None:
        return True  # the reader never calls clean_batches without a good segment header
    limit = len(data) if fence_limit is None else min(fence_limit, len(data))
    found = clean_batches(memoryview(data), scan.header.header_len, len(data), limit)
    if found is None:
        return not scan_clean
    listed = [(b.offset, b.header.batch_len, b.header.record_count) for b in scan.batches]
    ours = list(
        zip(
            found.offset.tolist(),
            found.batch_len.tolist(),
            found.record_count.tolist(),
            strict=True,
        )
    )
    commits = [b.header.commit_unix_ns for b in scan.batches]
    return scan_clean and ours == listed and found.commit_unix_ns.tolist() == commits


def test_a_clean_segment_is_clean_with_every_batch(segment: tuple[SegmentRef, bytes]) -> None:
    ref, data = segment
    header = fmt.decode_segment_header(data)
    found = clean_batches(memoryview(data), header.header_len, len(data), len(data))
    assert found is not None and len(found) == 41  # the fence and 40 sends
    assert agrees_with_the_scan(ref, data)


def test_a_flipped_bit_anywhere_is_never_called_clean(segment: tuple[SegmentRef, bytes]) -> None:
    ref, data = segment
    disagreements = []
    for bit in range(0, len(data) * 8, 13):
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        if not agrees_with_the_scan(ref, bytes(damaged)):
            disagreements.append(bit)
    assert disagreements == []


def test_a_cut_file_is_clean_only_at_a_batch_boundary(segment: tuple[SegmentRef, bytes]) -> None:
    ref, data = segment
    disagreements = [n for n in range(0, len(data), 8) if not agrees_with_the_scan(ref, data[:n])]
    assert disagreements == []


def test_a_fence_is_clean_only_past_the_last_batch(segment: tuple[SegmentRef, bytes]) -> None:
    ref, data = segment
    limits = [0, *range(64, len(data) + 64, 24)]
    assert [n for n in limits if not agrees_with_the_scan(ref, data, fence_limit=n)] == []
