"""Property tests of the STOMP codec: round trips, chunking, and arbitrary bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primacy.broker import frames as frames_module
from primacy.broker.frames import UNESCAPED_COMMANDS, Frame, FrameParser, StompProtocolError, encode
from tests.harness.fuzz_frames import fuzz

commands = st.sampled_from(
    ["SEND", "SUBSCRIBE", "MESSAGE", "ERROR", "RECEIPT", "ACK", "CONNECT", "CONNECTED"]
) | st.text(st.characters(min_codepoint=65, max_codepoint=90), min_size=1, max_size=12)
# Header text the codec carries: anything but the control characters it refuses (below).
header_text = st.characters(
    blacklist_categories=("Cs",), blacklist_characters=[*map(chr, range(32)), "\x7f"]
) | st.sampled_from("\t\r\n")
names = st.text(header_text, max_size=20).filter(lambda name: name != "content-length")
values = st.text(header_text, max_size=40)
refused = st.sampled_from([chr(c) for c in (*range(9), 11, 12, *range(14, 32), 127)])


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    command = draw(commands)
    headers = draw(st.lists(st.tuples(names, values), max_size=8))
    if command in UNESCAPED_COMMANDS:
        headers = [
            (k.replace(":", ""), v) for k, v in headers if not any(c in k + v for c in "\r\n")
        ]
    body = draw(st.binary(max_size=200))
    if b"\x00" in body or draw(st.booleans()):
        headers.append(("content-length", str(len(body))))
    return Frame(command, tuple(headers), body)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(st.lists(frames(), min_size=1, max_size=5), st.lists(st.integers(0, 10_000), max_size=10))
def test_encode_then_parse_gives_the_frames_back_however_the_bytes_are_cut(
    sent: list[Frame], cuts: list[int]
) -> None:
    data = b"\n".join(encode(frame) for frame in sent)  # heart-beats between frames
    parser = FrameParser()
    got = [frame for chunk in split(data, cuts) for frame in parser.feed(chunk)]
    assert got == sent


@given(frames())
def test_encode_is_stable_over_a_round_trip(frame: Frame) -> None:
    data = encode(frame)
    [parsed] = FrameParser().feed(data)
    assert encode(parsed) == data


@settings(max_examples=500)
@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=6))
def test_arbitrary_bytes_raise_nothing_but_the_parsers_error(data: bytes, cuts: list[int]) -> None:
    parser = FrameParser()
    try:
        for chunk in split(data, cuts):
            for frame in parser.feed(chunk):
                assert isinstance(frame, Frame)
    except StompProtocolError as error:
        assert error.code.startswith("PRIMACY-150")


def test_short_fuzz_run_of_mangled_frames() -> None:
    result = fuzz(20_000, seed=1)
    assert result.cases == 20_000
    # Both outcomes must occur, or the generator is not exercising the parser.
    assert result.frames_parsed > 1_000
    assert result.protocol_errors > 1_000


@pytest.mark.slow
def test_fuzz_run_of_two_hundred_thousand_frames() -> None:
    # The million-frame run is bench/stomp_fuzz.py's (docs/benchmarks.md): 47 s of the test
    # command's CPU for five times these cases of the same generator.
    result = fuzz(200_000, seed=2)
    assert result.cases == 200_000


one_line = values.filter(lambda text: not any(c in text for c in "\r\n:\\"))


@given(one_line, refused, one_line, st.booleans())
def test_a_control_character_in_a_header_is_refused_both_ways(
    before: str, control: str, after: str, in_name: bool
) -> None:
    text = before + control + after
    frame = Frame("SEND", (((text, "v") if in_name else ("k", text)),), b"")
    with pytest.raises(ValueError):
        encode(frame)
    raw = b"SEND\n" + (f"{text}:v" if in_name else f"k:{text}").encode() + b"\n\n\x00"
    with pytest.raises(StompProtocolError):
        FrameParser().feed(raw)


# Few characters, each of them plain or one the per-line rules treat specially.
head_text = st.text(st.sampled_from("ac:n\\ é\t\r\x01\x7f"), max_size=8)


@settings(max_examples=1000)
@given(
    commands | head_text,
    st.lists(st.tuples(head_text, st.sampled_from([":", ""]), head_text), max_size=6),
    st.sampled_from(["1.0", "1.1", "1.2"]),
    st.booleans(),
)
def test_a_plain_head_is_read_as_the_line_by_line_rules_read_it(
    command: str, headers: list[tuple[str, str, str]], version: str, crlf: bool
) -> None:
    """The parser's shortcut for plain heads (frames.py, ``_plain_head``) takes a head only
    where reading it line by line gives the same command and headers."""
    end = "\r\n" if crlf else "\n"
    lines = [command, *("".join(parts) for parts in headers)]
    raw = (end.join(lines) + end + end).encode("utf-8", "surrogatepass")
    plain = frames_module._plain_head(raw, max_headers=4)
    if plain is None:
        return
    assert plain == frames_module._head_by_lines(raw, 4, version)


@settings(max_examples=1000)
@given(
    st.lists(st.sampled_from([b"\n", b"\r", b"x"]), max_size=16).map(b"".join), st.integers(0, 8)
)
def test_the_end_of_a_head_is_the_first_blank_line_of_either_kind(data: bytes, start: int) -> None:
    buffer = bytearray(data)
    ends = [at + 2 for at in [buffer.find(b"\n\n", start)] if at >= 0]
    ends += [at + 3 for at in [buffer.find(b"\n\r\n", start)] if at >= 0]
    assert frames_module._find_blank_line(buffer, start) == (min(ends) if ends else None)
