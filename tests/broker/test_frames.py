"""The STOMP codec on fixed inputs: framing rules, escaping, heart-beats, every limit."""

from __future__ import annotations

import pytest

from primacy.broker import frames as f
from primacy.broker.frames import Frame, FrameLimits, FrameParser, StompProtocolError, encode


def parse_all(data: bytes, limits: FrameLimits | None = None) -> list[Frame]:
    return FrameParser(limits).feed(data)


def test_a_frame_with_headers_and_a_body() -> None:
    [frame] = parse_all(b"SEND\ndestination:/queue/a\nreceipt:1\n\nhello\x00")
    assert frame == Frame("SEND", (("destination", "/queue/a"), ("receipt", "1")), b"hello")


def test_crlf_line_ends_are_accepted() -> None:
    [frame] = parse_all(b"SEND\r\ndestination:/queue/a\r\n\r\nhi\x00")
    assert frame.command == "SEND"
    assert frame.get("destination") == "/queue/a"
    assert frame.body == b"hi"


def test_content_length_body_may_hold_nul() -> None:
    [frame] = parse_all(b"SEND\ncontent-length:3\n\na\x00b\x00")
    assert frame.body == b"a\x00b"


def test_heart_beats_between_frames_are_counted_not_frames() -> None:
    parser = FrameParser()
    got = parser.feed(b"\n\r\n\nSEND\n\n\x00\n\nACK\nid:1\n\n\x00\n")
    assert [frame.command for frame in got] == ["SEND", "ACK"]
    assert parser.heartbeats_received == 6


def test_byte_by_byte_feeding_gives_the_same_frames() -> None:
    data = b"SEND\r\nk:v\r\ncontent-length:2\r\n\r\n\x00\x01\x00\n" + b"NACK\nid:9\n\n\x00"
    parser = FrameParser()
    got = [frame for byte in data for frame in parser.feed(bytes([byte]))]
    assert got == parse_all(data)
    assert len(got) == 2


def test_the_first_of_repeated_headers_wins() -> None:
    [frame] = parse_all(b"SEND\nfoo:1\nfoo:2\n\n\x00")
    assert frame.get("foo") == "1"
    assert frame.header_dict() == {"foo": "1"}
    assert frame.headers == (("foo", "1"), ("foo", "2"))


def test_escapes_are_decoded_and_encoded() -> None:
    [frame] = parse_all(b"SEND\na\\cb:line\\none\\r\\\\\n\n\x00")
    assert frame.headers == (("a:b", "line\none\r\\"),)
    assert encode(frame) == b"SEND\na\\cb:line\\none\\r\\\\\n\n\x00"


def test_connect_frames_are_not_unescaped() -> None:
    [frame] = parse_all(b"CONNECT\npasscode:a\\nb:c\n\n\x00")
    assert frame.get("passcode") == "a\\nb:c"


def test_encode_refuses_what_it_cannot_write_faithfully() -> None:
    with pytest.raises(ValueError, match="content-length"):
        encode(Frame("SEND", (), b"a\x00b"))
    with pytest.raises(ValueError, match="not the body length"):
        encode(Frame("SEND", (("content-length", "5"),), b"a"))
    with pytest.raises(ValueError):
        encode(Frame("CONNECT", (("host", "a\nb"),)))
    with pytest.raises(ValueError):
        encode(Frame("", ()))


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"SEND\nno colon here\n\n\x00", f.MALFORMED_FRAME),
        (b"SEND\nk:bad\\tescape\n\n\x00", f.MALFORMED_FRAME),
        (b"SEND\nk:trailing\\\n\n\x00", f.MALFORMED_FRAME),
        (b"SEND\ncontent-length:-1\n\n\x00", f.MALFORMED_FRAME),
        (b"SEND\ncontent-length:abc\n\n\x00", f.MALFORMED_FRAME),
        (b"SEND\ncontent-length:1\n\nab\x00", f.MALFORMED_FRAME),
        (b"SE:ND\n\n\x00", f.MALFORMED_FRAME),
        (b"SEND\nk:\xff\xfe\n\n\x00", f.INVALID_UTF8),
        (b"\xc3\x28\n\n\x00", f.INVALID_UTF8),
    ],
)
def test_malformed_frames_raise_the_parsers_error(data: bytes, code: str) -> None:
    with pytest.raises(StompProtocolError) as raised:
        parse_all(data)
    assert raised.value.code == code


def test_frame_size_limit_by_content_length_is_refused_before_the_body_arrives() -> None:
    parser = FrameParser(FrameLimits(max_frame_bytes=100))
    with pytest.raises(StompProtocolError) as raised:
        parser.feed(b"SEND\ncontent-length:101\n\n")
    assert raised.value.code == f.FRAME_TOO_LARGE


def test_frame_size_limit_without_content_length() -> None:
    parser = FrameParser(FrameLimits(max_frame_bytes=100))
    parser.feed(b"SEND\n\n" + b"x" * 90)
    with pytest.raises(StompProtocolError) as raised:
        parser.feed(b"x" * 20)
    assert raised.value.code == f.FRAME_TOO_LARGE


def test_a_frame_at_the_limit_is_accepted() -> None:
    head = b"SEND\n\n"
    [frame] = parse_all(head + b"x" * (100 - len(head)) + b"\x00", FrameLimits(max_frame_bytes=100))
    assert len(frame.body) == 100 - len(head)


def test_header_section_limit_applies_while_waiting_for_the_blank_line() -> None:
    parser = FrameParser(FrameLimits(max_header_bytes=64))
    with pytest.raises(StompProtocolError) as raised:
        parser.feed(b"SEND\nk:" + b"v" * 100)
    assert raised.value.code == f.HEADERS_TOO_LARGE


def test_header_count_limit() -> None:
    headers = b"".join(b"h%d:v\n" % i for i in range(5))
    with pytest.raises(StompProtocolError) as raised:
        parse_all(b"SEND\n" + headers + b"\n\x00", FrameLimits(max_headers=4))
    assert raised.value.code == f.TOO_MANY_HEADERS
    assert (
        len(parse_all(b"SEND\n" + headers + b"\n\x00", FrameLimits(max_headers=5))[0].headers) == 5
    )


def test_a_failed_parser_stays_failed() -> None:
    parser = FrameParser()
    with pytest.raises(StompProtocolError):
        parser.feed(b"SEND\nbad\n\n\x00")
    with pytest.raises(StompProtocolError):
        parser.feed(b"SEND\n\n\x00")


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FrameLimits(max_headers=0)
