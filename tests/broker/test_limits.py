"""Limits and protocol errors: a clear ERROR frame, the connection closed, nothing stored."""

from __future__ import annotations

import socket

import pytest

from primacy.broker.config import BrokerConfig
from primacy.broker.frames import FrameLimits
from tests.broker.nodes import Masters, RawClient, stored_state
from tests.broker.stomppy import StompPy


def refused(client: RawClient) -> tuple[str, str, dict[str, str]]:
    """The ERROR the broker sent before closing: (code, body, headers)."""
    frames = client.read_until_closed()
    errors = [frame for frame in frames if frame.command == "ERROR"]
    assert len(errors) == 1, frames
    error = errors[0]
    message = error.get("message") or ""
    return message.split()[0], error.body.decode(), error.header_dict()


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b"FLY\n\n\x00", "PRIMACY-1506"),
        (b"MESSAGE\ndestination:/queue/a\n\n\x00", "PRIMACY-1506"),
        (b"SEND\ndestination:/queue/a\nk:\xff\n\nx\x00", "PRIMACY-1504"),
        (b"SEND\ndestination:/exchange/a\n\nx\x00", "PRIMACY-1512"),
        (b"SEND\ndestination:/topic/\n\nx\x00", "PRIMACY-1512"),
        (b"SEND\n\nno destination\x00", "PRIMACY-1510"),
        (b"SEND\ndestination:/queue/a\nbad line\n\nx\x00", "PRIMACY-1505"),
        (b"SUBSCRIBE\ndestination:/queue/a\nid:1\nack:sometimes\n\n\x00", "PRIMACY-1510"),
        (b"COMMIT\ntransaction:never-begun\n\n\x00", "PRIMACY-1510"),
    ],
)
def test_bad_frames_get_an_error_and_store_nothing(
    masters: Masters, frame: bytes, code: str
) -> None:
    master = masters.start()
    before = stored_state(masters.share).last_sequence
    client = RawClient(master.address)
    assert client.connect().command == "CONNECTED"
    client.send_bytes(frame)
    assert refused(client)[0] == code
    assert stored_state(masters.share).last_sequence == before


def test_frames_before_connect_are_refused(masters: Masters) -> None:
    client = RawClient(masters.start().address)
    client.send("SEND", {"destination": "/queue/a"}, b"x")
    assert refused(client)[0] == "PRIMACY-1509"


def test_an_unsupported_version_is_refused_naming_ours(masters: Masters) -> None:
    client = RawClient(masters.start().address)
    client.send("CONNECT", {"accept-version": "2.0,3.1", "host": "x"})
    code, _, headers = refused(client)
    assert code == "PRIMACY-1511"
    assert headers["version"] == "1.0,1.1,1.2"


def test_frame_header_and_count_limits(masters: Masters) -> None:
    limits = FrameLimits(max_frame_bytes=2048, max_header_bytes=512, max_headers=4)
    master = masters.start(BrokerConfig(frame_limits=limits))
    cases = [
        ({"destination": "/queue/a"}, b"x" * 3000, "PRIMACY-1501"),
        ({"destination": "/queue/a", "big": "v" * 600}, b"x", "PRIMACY-1502"),
        ({"destination": "/queue/a", **{f"h{i}": "v" for i in range(5)}}, b"x", "PRIMACY-1503"),
    ]
    for headers, body, code in cases:
        client = RawClient(master.address)
        client.connect()
        client.send("SEND", {**headers, "receipt": "r"}, body)
        assert refused(client)[0] == code
    assert stored_state(masters.share).pending == {}


def test_a_message_over_max_message_size_is_refused_with_its_receipt_id(masters: Masters) -> None:
    master = masters.start(max_message_size=1024)
    client = RawClient(master.address)
    client.connect()
    client.send("SEND", {"destination": "/queue/a", "receipt": "r-big"}, b"x" * 2000)
    code, body, headers = refused(client)
    assert code == "PRIMACY-1507"
    assert headers["receipt-id"] == "r-big"
    assert "max_message_size" in body
    assert stored_state(masters.share).pending == {}


def test_a_silent_client_is_cut_off_after_its_heart_beat_timeout(masters: Masters) -> None:
    master = masters.start(BrokerConfig(heart_beat_receive_ms=50, heart_beat_send_ms=0))
    client = RawClient(master.address)
    connected = client.connect(heart_beat="50,0")
    assert connected.get("heart-beat") == "0,50"
    assert refused(client)[0] == "PRIMACY-1508"


def test_the_broker_sends_heart_beats_when_asked(masters: Masters) -> None:
    master = masters.start(BrokerConfig(heart_beat_send_ms=20))
    client = RawClient(master.address)
    client.connect(heart_beat="0,20")
    while client.parser.heartbeats_received < 3:
        client.frames += client.parser.feed(client.sock.recv(100))
    assert client.frames == []


def test_a_client_that_never_connects_is_closed(masters: Masters) -> None:
    client = RawClient(masters.start(BrokerConfig(connect_timeout_s=0.1)).address)
    assert refused(client)[0] == "PRIMACY-1515"


def test_one_bad_client_does_not_hurt_another(masters: Masters) -> None:
    master = masters.start()
    good = StompPy(master.address)
    bad = RawClient(master.address)
    bad.connect()
    bad.send_bytes(b"SEND\ndestination:/queue/a\ncontent-length:zzz\n\n\x00")
    assert refused(bad)[0] == "PRIMACY-1505"
    garbage = RawClient(master.address)
    garbage.send_bytes(bytes(range(256)) + b"\n\n\x00")
    garbage.read_until_closed()
    assert good.send("/queue/a", "still fine", **{"message-id": "ok-1"})
    assert list(stored_state(masters.share).pending["/queue/a"]) == ["ok-1"]
    good.close()


def test_a_consumer_that_stops_reading_does_not_stall_producers_or_other_consumers(
    masters: Masters,
) -> None:
    master = masters.start(BrokerConfig(write_buffer_high_bytes=16 * 1024))
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(master.address)
    stalled.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
    stalled.sendall(
        b"SUBSCRIBE\nid:1\ndestination:/queue/a\nack:client-individual\n"
        b"activemq.prefetchSize:5\n\n\x00"
    )
    healthy = StompPy(master.address)
    healthy.subscribe("/queue/a", "s1", ack="auto")
    producer = StompPy(master.address)
    body = "x" * 65536
    for n in range(60):
        assert producer.send("/queue/a", body, **{"message-id": f"m-{n}"})
    received = 0
    while not healthy.no_message(wait_s=1.0):
        received += 1
    assert received == 55  # all but the stalled consumer's prefetch of 5
    stalled.close()
    producer.close()
    healthy.close()


@pytest.mark.parametrize(
    "header_line",
    [b"destination:/queue/a\x00b", b"colour:bl\x00ue", b"col\x01our:blue", b"colour:bl\x1bue"],
)
def test_a_nul_or_control_character_in_a_header_is_refused_and_nothing_stored(
    masters: Masters, header_line: bytes
) -> None:
    master = masters.start()
    client = RawClient(master.address)
    client.connect()
    destination = b"" if header_line.startswith(b"destination") else b"destination:/queue/a\n"
    client.send_bytes(
        b"SEND\n" + destination + header_line + b"\nmessage-id:m-1\nreceipt:r1\n\nbody\x00"
    )
    code, body, _ = refused(client)
    assert code == "PRIMACY-1505" and "control character" in body
    assert stored_state(masters.share).pending == {}
