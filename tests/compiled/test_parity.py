"""The compiled hot path and the pure-Python one give the same frames and records, byte for byte.

Each property runs the compiled module (as this install imports it) and the same source
as pure Python (tests/compiled/sources.py) on the same input, and compares what comes
out: the bytes written, what is parsed back, and any error (its type, code and words).
Skips where nothing is compiled; test_fresh.py fails if that is not allowed here.
"""

from __future__ import annotations

import enum
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from itertools import pairwise, product
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primacy.broker.codes import MALFORMED_FRAME
from primacy.store.compiled import PURE_PYTHON_VARIABLE, is_compiled
from tests.compiled.sources import ROOT, compiled_and_source, installed_module
from tests.harness.fuzz_frames import LIMITS, SPECIAL, mangle, random_frame

examples = settings(max_examples=200, deadline=None)
# Text heavy in what the codec treats specially: escapes and separators, and now and then a
# control character it refuses or a lone surrogate UTF-8 cannot carry.
clean_text = st.text(
    st.sampled_from(":\\\r\n\tac é") | st.characters(blacklist_categories=("Cs", "Cc")),
    max_size=30,
)
dirty_text = st.text(st.sampled_from(":\x00\x01\x7fa") | st.characters(), max_size=5)
text = st.one_of(clean_text, clean_text, clean_text, dirty_text)


@st.composite
def stomp_frames(draw: st.DrawFn) -> tuple[str, tuple[tuple[str, str], ...], bytes]:
    """A frame's parts, valid or not: each module makes its own Frame of them."""
    command = draw(st.sampled_from(["SEND"] * 6 + ["MESSAGE", "CONNECT", "CONNECTED", "S\nX", ""]))
    headers = draw(st.lists(st.tuples(text, text), max_size=6))
    body = draw(st.binary(max_size=64) | st.just(b"a\x00b"))
    if draw(st.integers(0, 9)) > (0 if b"\x00" in body else 5):  # now and then left out
        headers.append(("content-length", str(len(body))))
    return command, tuple(headers), body


stream_bytes = st.lists(
    st.sampled_from(SPECIAL) | st.binary(max_size=12) | st.sampled_from([b"SEND\n", b"a:b\n"]),
    max_size=40,
).map(b"".join)


def plain(value: Any) -> Any:
    """A value with the module's own classes taken out, so two modules' results compare."""
    if isinstance(value, enum.Enum):
        return (type(value).__name__, value.name, value.value)
    if hasattr(value, "__dataclass_fields__"):
        return (
            type(value).__name__,
            {f: plain(getattr(value, f)) for f in value.__dataclass_fields__},
        )
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def outcome(call: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What ``call(*args)`` gave: its value, or the error it raised (type, words, code)."""
    try:
        return ("returned", plain(call(*args)))
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc), getattr(exc, "code", None))


# ---------------------------------------------------------------- the STOMP codec


@examples
@given(stomp_frames(), st.sampled_from(["1.0", "1.1", "1.2"]))
def test_encode_writes_the_same_bytes(frame: Any, version: str) -> None:
    compiled, source = compiled_and_source("broker/frames.py")
    results = [outcome(lambda m=m: m.encode(m.Frame(*frame), version)) for m in (compiled, source)]
    assert results[0] == results[1]


@examples
@given(
    st.lists(stomp_frames(), max_size=4),
    stream_bytes,
    st.lists(st.integers(0, 10_000), max_size=6),
    st.sampled_from(["1.0", "1.1", "1.2"]),
)
def test_the_parser_reads_the_same_frames_and_refuses_the_same_bytes(
    frames: list[Any], noise: bytes, cuts: list[int], version: str
) -> None:
    compiled, source = compiled_and_source("broker/frames.py")
    stream = b"".join(_encoded(compiled, compiled.Frame(*frame)) for frame in frames)
    stream += noise
    points = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    chunks = [stream[a:b] for a, b in pairwise(points)]
    results = []
    for module in (compiled, source):
        parser = module.FrameParser(module.FrameLimits(4096, 512, 8), version)
        results.append([outcome(lambda p=parser, c=chunk: p.feed(c)) for chunk in chunks])
    assert results[0] == results[1]


def _encoded(module: Any, frame: Any) -> bytes:
    """The frame's bytes, or its command line alone where it cannot be encoded."""
    try:
        return bytes(module.encode(frame))
    except ValueError:
        return frame.command.encode() + b"\n"


@examples
@given(st.one_of(st.none(), text), text, st.one_of(st.none(), text))
def test_the_frame_checks_answer_the_same(
    accept: str | None, value: str, destination: str | None
) -> None:
    compiled, source = compiled_and_source("broker/frame_rules.py")
    for check in (
        lambda m: m.negotiate_version(accept),
        lambda m: m.heart_beat(value),
        lambda m: m.positive_int(destination, 7),
        lambda m: m.check_destination(destination),
        lambda m: m.error_frame(MALFORMED_FRAME, value, destination),
    ):
        assert outcome(check, compiled) == outcome(check, source)


# Every character the codec escapes or refuses, alone and together, in a name and a value.
SPECIAL_TEXT = [
    ":",
    "\\",
    "\r",
    "\n",
    "\t",
    "é",
    "a:b\\c\r\nd",
    "",
    "\x00",
    "\x1f",
    "\x7f",
    "\ud800",
]


def test_every_escape_and_refusal_alike_in_every_version() -> None:
    modules = compiled_and_source("broker/frames.py")
    for version, command, key, value in product(
        ["1.0", "1.1", "1.2"], ["SEND", "CONNECT", "ERROR"], SPECIAL_TEXT, SPECIAL_TEXT
    ):
        written = [outcome(_encode_one, m, command, key, value, version) for m in modules]
        assert written[0] == written[1], (version, command, key, value)
        if written[0][0] == "returned":
            read = [outcome(_parse, m, written[0][1], version) for m in modules]
            assert read[0] == read[1], (version, command, key, value)


def _encode_one(module: Any, command: str, key: str, value: str, version: str) -> bytes:
    return bytes(module.encode(module.Frame(command, ((key, value),), b"x"), version))


def _parse(module: Any, data: bytes, version: str) -> list[Any]:
    return list(module.FrameParser(version=version).feed(data))


def test_the_fuzz_corpus_parses_alike() -> None:
    """The parser's fuzz cases (tests/harness/fuzz_frames.py), mangled 7 times in 10, fed to
    both parsers in the same random chunks."""
    compiled, source = compiled_and_source("broker/frames.py")
    rng = random.Random(30)
    for case in range(3000):
        data = random_frame(rng)
        if rng.random() < 0.7:
            data = mangle(data, rng)
        cuts = sorted(rng.sample(range(len(data) + 1), min(4, len(data) + 1)))
        chunks = [data[a:b] for a, b in pairwise([0, *cuts, len(data)])]
        results = []
        for module in (compiled, source):
            parser = module.FrameParser(
                module.FrameLimits(
                    LIMITS.max_frame_bytes, LIMITS.max_header_bytes, LIMITS.max_headers
                )
            )
            results.append([outcome(parser.feed, chunk) for chunk in chunks])
        assert results[0] == results[1], (case, data)


# ---------------------------------------------------------------- the journal's records

record_types = st.sampled_from(["SEND", "ACK", "CONTROL", "FENCE", "DELIVER"])
records = st.lists(
    st.tuples(
        record_types,
        st.integers(-(2**63), 2**63 - 1),
        st.binary(max_size=20),
        st.binary(max_size=20),
        st.binary(max_size=30),
        st.binary(max_size=64),
    ),
    min_size=1,
    max_size=6,
)
u64 = st.integers(0, 2**64 - 1)


def _batch(module: Any, epoch: int, first: int, commit: int, rows: list[Any]) -> bytes:
    encoded = [
        module.EncodedRecord(module.RecordType[kind], ts, dest, mid, headers, payload)
        for kind, ts, dest, mid, headers, payload in rows
    ]
    return bytes(module.encode_batch(epoch, first, commit, encoded))


@examples
@given(u64, u64, st.integers(-(2**63), 2**63 - 1), records)
def test_batches_are_written_byte_for_byte_alike(
    epoch: int, first: int, commit: int, rows: list[Any]
) -> None:
    compiled, source = compiled_and_source("store/format.py")
    assert outcome(lambda: _batch(compiled, epoch, first, commit, rows)) == outcome(
        lambda: _batch(source, epoch, first, commit, rows)
    )


@examples
@given(records, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4))
def test_batches_read_back_alike_whole_or_damaged(rows: list[Any], damage: list[Any]) -> None:
    compiled, source = compiled_and_source("store/format.py")
    data = bytearray(_batch(compiled, 3, 100, 5, rows))
    for where, value in damage:
        data[where % len(data)] = value
    raw = bytes(data)
    for read in (
        lambda m: m.check_batch(raw, 0),
        lambda m: list(m.iter_records(raw)),
        lambda m: m.record_keys(raw),
        lambda m: m.records_fault(raw),
    ):
        assert outcome(read, compiled) == outcome(read, source)


@examples
@given(u64, u64, text, st.integers(-(2**63), 2**63 - 1), st.binary(max_size=8))
def test_segment_headers_alike(
    epoch: int, first: int, node: str, created: int, junk: bytes
) -> None:
    compiled, source = compiled_and_source("store/format.py")
    written = [
        outcome(lambda m=m: m.encode_segment_header(m.SegmentHeader(epoch, first, node, created)))
        for m in (compiled, source)
    ]
    assert written[0] == written[1]
    if written[0][0] == "returned":
        raw = written[0][1] + junk
        read = [outcome(lambda m=m: m.decode_segment_header(raw)) for m in (compiled, source)]
        assert read[0] == read[1]


@examples
@given(
    st.one_of(st.none(), st.dictionaries(text, text, max_size=5)),
    st.binary(max_size=40),
)
def test_record_payloads_alike(headers: dict[str, str] | None, raw: bytes) -> None:
    compiled, source = compiled_and_source("store/payloads.py")
    for call in (
        lambda m: m.encode_headers(headers),
        lambda m: m.decode_headers(m.encode_headers(headers) + raw[:0]),
        lambda m: m.decode_headers(raw),
        lambda m: m.decode_fence(raw),
        lambda m: m.decode_control(raw),
    ):
        assert outcome(call, compiled) == outcome(call, source)


@examples
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["SEND", "ACK", "DELIVER"]),
            st.sampled_from(["/queue/a", "/queue/b"]),
            st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
            st.sampled_from(["s1", "s2"]),
        ),
        max_size=40,
    ),
    st.integers(1, 4),
)
def test_the_journal_state_builds_alike(steps: list[Any], window: int) -> None:
    compiled, source = compiled_and_source("store/state.py")
    format_module = compiled_and_source("store/format.py")[0]
    states = [compiled.JournalState(window), source.JournalState(window)]
    for sequence, (kind, destination, message_id, segment) in enumerate(steps, start=1):
        for state in states:
            state.apply(
                format_module.RecordType[kind],
                sequence,
                destination,
                message_id,
                segment,
                sequence * 8,
            )
    assert states[0].to_json() == states[1].to_json()
    assert [s.pending_count() for s in states] == [states[0].pending_count()] * 2
    assert outcome(
        lambda: compiled.JournalState.from_json(states[0].to_json(), window).to_json()
    ) == outcome(lambda: source.JournalState.from_json(states[1].to_json(), window).to_json())


# ---------------------------------------------------------------- a connection's conversation

# What runs the conversation of tests/compiled/session.py, all of them compiled or none.
CONVERSATION_MODULES = [
    "broker/connection.py",
    "broker/commands.py",
    "broker/core.py",
    "store/writer.py",
]


def _conversation(pure: bool) -> dict[str, str]:
    env = {**os.environ, PURE_PYTHON_VARIABLE: "1" if pure else "0"}
    run = subprocess.run(
        [sys.executable, "-m", "tests.compiled.session"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    said: dict[str, str] = json.loads(run.stdout)
    return said


def test_a_conversation_is_answered_alike_byte_for_byte() -> None:
    """Connections, commands, the broker core and the journal writer, compiled against their
    source: every byte each client is sent, in order (receipts, messages, redeliveries after
    a NACK, a resend's receipt, a committed and an aborted transaction, STOMP 1.0, ERRORs)."""
    for path in CONVERSATION_MODULES:
        if not is_compiled(installed_module(path)):
            pytest.skip(f"{path} is not compiled in this install (see test_fresh.py)")
    compiled, pure = _conversation(pure=False), _conversation(pure=True)
    assert compiled == pure
    assert compiled["producer"].count("RECEIPT\n") == 6  # r1 r2 r1b r3 r4 r5 (r6 is an ERROR)
    assert compiled["consumer"].count("MESSAGE\n") == 5
    assert "redelivered:true" in compiled["consumer"]
    for name in ("producer", "stomp 1.0", "stranger"):
        assert compiled[name].rstrip("\x00").rsplit("ERROR\n", 1)[-1].startswith("message:")
