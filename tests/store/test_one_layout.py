"""The journal's layouts are written once, in store/format.py: no copy anywhere else (issue 43).

spark/ once restated the batch and record headers as numpy dtypes, and only the
header size was checked against the store; a field the store changed would have
been read at the wrong place. Now every reader derives its view from
``fmt.*_FIELDS``. This looks through every Python file of the repository outside
store/ for a copy: a layout's ``struct`` format, or three or more of a layout's
field names each paired with a type (a dtype or ``struct`` list), and for code
outside store/ that parses the journal's bytes itself (``struct`` or ``crc32c``
in spark/).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np

from primacy.store import format as fmt
from primacy.store.columns import BATCH_HEADER_DTYPE, RECORD_DTYPE, numpy_dtype

ROOT = Path(__file__).resolve().parents[2]
LAYOUTS = (fmt.SEGMENT_HEADER_FIELDS, fmt.BATCH_HEADER_FIELDS, fmt.RECORD_HEADER_FIELDS)
# A field name in quotes, then a type in quotes: ("payload_len", "<u4") or ('epoch', 'Q').
_TYPED_FIELD = re.compile(r"""["'](\w+)["']\s*,\s*["'][<>=|]?[A-Za-z]{1,2}\d*["']""")
_TOO_COMMON = {"epoch", "sequence", "magic", "flags", "reserved"}  # words of any code


def python_files_outside_store() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if not name.startswith("store/")]


def test_no_layout_is_restated_outside_store() -> None:
    formats = {fmt.layout_struct(layout).format for layout in LAYOUTS}
    formats |= {f.lstrip("<") for f in formats}
    names = {name for layout in LAYOUTS for name, _ in layout} - _TOO_COMMON
    copies = []
    for path in python_files_outside_store():
        if not path.is_file():
            continue  # listed but deleted in the working tree
        text = path.read_text(errors="replace")
        if any(f'"{f}"' in text or f"'{f}'" in text for f in formats):
            copies.append(f"{path.relative_to(ROOT)}: a layout's struct format")
        typed = {m[1] for m in _TYPED_FIELD.finditer(text)} & names
        if len(typed) >= 3:
            copies.append(f"{path.relative_to(ROOT)}: fields {sorted(typed)} with their types")
    assert copies == []


def test_spark_parses_no_journal_bytes_itself() -> None:
    parsing = [
        path.name
        for path in (ROOT / "spark").glob("*.py")
        if re.search(r"^(import|from) (struct|crc32c)\b", path.read_text(), re.MULTILINE)
    ]
    assert parsing == []


def test_the_column_dtypes_are_the_layouts() -> None:
    for dtype, layout in (
        (RECORD_DTYPE, fmt.RECORD_HEADER_FIELDS),
        (BATCH_HEADER_DTYPE, fmt.BATCH_HEADER_FIELDS),
    ):
        assert dtype.names == tuple(name for name, _ in layout)
        assert dtype.itemsize == fmt.layout_struct(layout).size
        for name, _ in layout:
            assert dtype.fields is not None
            assert dtype.fields[name][1] == fmt.field_offset(layout, name)
    assert numpy_dtype(fmt.SEGMENT_HEADER_FIELDS).itemsize == fmt.SEGMENT_HEADER_FIXED_LEN


def test_a_batch_reads_the_same_through_struct_and_numpy() -> None:
    record = fmt.EncodedRecord(fmt.RecordType.SEND, -5, b"q", b"id", b"", b"payload")
    batch = fmt.encode_batch(7, 2**63 + 1, 123, [record, record])
    header = np.frombuffer(batch, BATCH_HEADER_DTYPE, count=1)[0]
    slots = np.frombuffer(batch, RECORD_DTYPE, count=2, offset=fmt.BATCH_HEADER_LEN)
    parsed = fmt.batch_header_at(memoryview(batch))
    assert (int(header["epoch"]), int(header["first_sequence"])) == (7, 2**63 + 1)
    assert (int(header["batch_len"]), int(header["heap_len"])) == (
        parsed.batch_len,
        parsed.heap_len,
    )
    assert [int(s) for s in slots["sequence"]] == [2**63 + 1, 2**63 + 2]
    assert [int(t) for t in slots["timestamp_unix_ns"]] == [-5, -5]
    assert [int(n) for n in slots["payload_len"]] == [7, 7]
