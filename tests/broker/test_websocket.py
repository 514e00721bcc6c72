"""STOMP over WebSocket (broker/websocket.py) seen from a real WebSocket client (the
``websockets`` library's): the subprotocols, one frame per message, heart-beats, TLS and
logins as on the TCP listener, admission, the close at shutdown, and a client that breaks
the WebSocket protocol. The browser and failover side is tests/interop/test_browser_websocket.py."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.protocol import State
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from primacy.broker import codes
from primacy.broker.config import BrokerConfig
from primacy.broker.frames import FrameLimits
from primacy.broker.users import User, hash_password, save_users
from tests.broker.nodes import Master, Masters, eventually
from tests.harness.tls_certs import make_pki

STOMP = [Subprotocol(name) for name in ("v10.stomp", "v11.stomp", "v12.stomp")]
# What a client sees of a connection closed before (or during) the opening handshake.
NOT_OPENED = (InvalidHandshake, ConnectionClosed, OSError)
CONNECT = "CONNECT\naccept-version:1.0,1.1,1.2\nhost:x\n{}\n\x00"


def _start(masters: Masters, config: BrokerConfig | None = None) -> Master:
    return masters.start(config, websocket=("127.0.0.1", 0))


def _url(master: Master, scheme: str = "ws") -> str:
    assert master.service.websocket_address is not None
    return f"{scheme}://127.0.0.1:{master.service.websocket_address[1]}/stomp"


def _connected(ws: ClientConnection, headers: str = "") -> str:
    ws.send(CONNECT.format(headers))
    reply = str(ws.recv(10))
    assert reply.startswith("CONNECTED\n"), reply
    return reply


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (STOMP, "v12.stomp"),
        ([Subprotocol("v10.stomp")], "v10.stomp"),
        ([Subprotocol("chat"), Subprotocol("v11.stomp")], "v11.stomp"),
        (None, None),  # RabbitMQ's Web STOMP and ActiveMQ serve such a client too
    ],
)
def test_the_newest_stomp_subprotocol_offered_is_chosen(
    masters: Masters, offered: list[Subprotocol] | None, chosen: str | None
) -> None:
    master = _start(masters)
    with connect(_url(master), subprotocols=offered) as ws:
        assert ws.subprotocol == chosen
        _connected(ws)


def test_a_client_offering_no_stomp_subprotocol_is_refused_with_400(
    masters: Masters, caplog: pytest.LogCaptureFixture
) -> None:
    master = _start(masters)
    with pytest.raises(InvalidStatus) as refused:
        connect(_url(master), subprotocols=[Subprotocol("mqtt")])
    assert refused.value.response.status_code == 400
    assert codes.WEBSOCKET_HANDSHAKE_REFUSED in caplog.text
    with connect(_url(master), subprotocols=STOMP) as ws:  # the listener serves on
        _connected(ws)


def test_frames_split_or_joined_across_messages_and_binary_bodies(masters: Masters) -> None:
    master = _start(masters)
    with connect(_url(master), subprotocols=STOMP) as ws:
        _connected(ws)
        body = bytes(range(256))  # not UTF-8: the broker sends this frame as a binary message
        send = f"SEND\ndestination:/queue/ws\nreceipt:r1\ncontent-length:{len(body)}\n\n"
        ws.send(send.encode()[:10])
        ws.send(send.encode()[10:] + body + b"\x00")
        assert ws.recv(10) == "RECEIPT\nreceipt-id:r1\n\n\x00"
        # Two frames in one message: each reply in a message of its own.
        ws.send(
            "SUBSCRIBE\ndestination:/queue/ws\nid:s\nreceipt:r2\n\n\x00"
            "SEND\ndestination:/queue/other\nreceipt:r3\n\ntext\x00"
        )
        replies = [ws.recv(10) for _ in range(3)]
        assert "RECEIPT\nreceipt-id:r2\n\n\x00" in replies
        assert "RECEIPT\nreceipt-id:r3\n\n\x00" in replies
        [message] = [reply for reply in replies if isinstance(reply, bytes)]
        assert message.startswith(b"MESSAGE\n") and message.endswith(b"\n\n" + body + b"\x00")


def test_heart_beats_are_messages_of_one_end_of_line(masters: Masters) -> None:
    master = _start(masters, BrokerConfig(heart_beat_send_ms=100))
    with connect(_url(master), subprotocols=STOMP) as ws:
        reply = _connected(ws, "heart-beat:0,100\n")
        assert "\nheart-beat:" in reply
        assert ws.recv(10) == "\n"
        assert ws.recv(10) == "\n"


def test_logins_and_tls_are_the_stomp_listeners(masters: Masters, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    users = tmp_path / "users.json"
    save_users(users, {"app": User("app", hash_password("app password"))})
    master = _start(
        masters, BrokerConfig(stomp_users=users, stomp_tls_cert=pki.cert, stomp_tls_key=pki.key)
    )
    trust = ssl.create_default_context(cafile=str(pki.ca))
    with connect(_url(master, "wss"), subprotocols=STOMP, ssl=trust) as ws:
        ws.send(CONNECT.format("login:app\npasscode:wrong\n"))
        refused = str(ws.recv(10))
        assert refused.startswith("ERROR\n") and codes.LOGIN_FAILED in refused, refused
    with connect(_url(master, "wss"), subprotocols=STOMP, ssl=trust) as ws:
        _connected(ws, "login:app\npasscode:app password\n")
    with pytest.raises(NOT_OPENED):
        connect(_url(master), subprotocols=STOMP, open_timeout=5)  # no TLS: dropped
    eventually(
        lambda: master.service.stats()["tls_handshakes_failed"] == 1, "the plain client counted"
    )
    assert master.service.stats()["logins_ok"] == 1


def test_mutual_tls_over_websocket_lets_in_certificates_of_its_ca_only(
    masters: Masters, tmp_path: Path
) -> None:
    """``wss://`` with ``stomp_tls_ca`` asks every client for a certificate of that CA, as the
    TCP listener does: with one the WebSocket and STOMP handshakes follow; without one, or
    with another CA's, the TLS handshake fails and is counted."""
    pki = make_pki(tmp_path / "pki")
    master = _start(
        masters,
        BrokerConfig(stomp_tls_cert=pki.cert, stomp_tls_key=pki.key, stomp_tls_ca=pki.ca),
    )

    def client(cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(pki.ca))
        if cert is not None:
            context.load_cert_chain(cert, key)
        return context

    with connect(
        _url(master, "wss"), subprotocols=STOMP, ssl=client(pki.client_cert, pki.client_key)
    ) as ws:
        _connected(ws)
    for refused in (client(), client(pki.stranger_cert, pki.stranger_key)):
        with (
            pytest.raises(NOT_OPENED),
            connect(_url(master, "wss"), subprotocols=STOMP, ssl=refused, open_timeout=5) as ws,
        ):
            _connected(ws)
    eventually(
        lambda: master.service.stats()["tls_handshakes_failed"] == 2, "both refusals counted"
    )


def test_admission_limits_count_websocket_connections_too(masters: Masters) -> None:
    master = _start(masters, BrokerConfig(max_connections=1))
    with connect(_url(master), subprotocols=STOMP) as ws:
        _connected(ws)
        with pytest.raises(NOT_OPENED):
            connect(_url(master), subprotocols=STOMP, open_timeout=5)
        assert master.service.stats()["connections_refused"] == 1
        ws.send("SEND\ndestination:/queue/ws\nreceipt:r\n\nstill served\x00")
        assert ws.recv(10) == "RECEIPT\nreceipt-id:r\n\n\x00"


def test_a_stopping_broker_tells_websocket_clients_it_is_shutting_down(masters: Masters) -> None:
    master = _start(masters)
    with connect(_url(master), subprotocols=STOMP) as ws:
        _connected(ws)
        master.stop()  # what demotion does
        error = str(ws.recv(10))
        assert error.startswith("ERROR\n") and codes.SHUTTING_DOWN in error, error
        with pytest.raises(ConnectionClosed):
            ws.recv(10)
    with pytest.raises(NOT_OPENED):
        connect(_url(master), subprotocols=STOMP, open_timeout=5)  # no longer listening


def test_a_message_over_the_frame_limit_closes_the_connection(
    masters: Masters, caplog: pytest.LogCaptureFixture
) -> None:
    limits = FrameLimits(max_frame_bytes=4096)
    master = _start(masters, BrokerConfig(frame_limits=limits))
    with connect(_url(master), subprotocols=STOMP, max_size=None) as ws:
        _connected(ws)
        ws.send(b"x" * (4096 + 64 * 1024 + 1))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big
    assert codes.WEBSOCKET_PROTOCOL_ERROR in caplog.text


def test_a_websocket_client_that_never_reads_stops_being_read(masters: Masters) -> None:
    # As on TCP (test_memory_attacks.py): BEGIN/ABORT pairs with long receipt ids, two 8 KB
    # RECEIPTs for each 16 KB sent, to a client that reads nothing. Once the socket's buffer
    # passes write_buffer_high_bytes the broker stops reading, through the WebSocket link
    # too, so the client's sends stall long before it has sent what the broker would hold.
    master = _start(masters)
    assert master.service.websocket_address is not None
    client = ClientProtocol(parse_uri(_url(master)), subprotocols=STOMP)
    flooder = socket.socket()
    flooder.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    flooder.settimeout(10)
    flooder.connect(master.service.websocket_address)
    client.send_request(client.connect())
    flooder.sendall(b"".join(client.data_to_send()))
    while client.state is not State.OPEN:
        client.receive_data(flooder.recv(4096))
        assert client.handshake_exc is None, client.handshake_exc
    client.send_text(CONNECT.format("").encode())
    receipt = "r" * 8000
    pair = "".join(
        f"{command}\ntransaction:t\nreceipt:{receipt}\n\n\x00" for command in ("BEGIN", "ABORT")
    )
    chunk = (pair * 64).encode()  # 1 MiB in one message
    sent = 0
    flooder.settimeout(3.0)  # a broker that stopped reading takes nothing for this long
    try:
        while sent < 192 * 1024 * 1024:
            client.send_text(chunk)
            flooder.sendall(b"".join(client.data_to_send()))
            sent += len(chunk)
    except TimeoutError:
        pass
    flooder.close()
    assert sent < 64 * 1024 * 1024, f"the broker read {sent // (1024 * 1024)} MiB unanswered"
    with connect(_url(master), subprotocols=STOMP) as ws:  # and serves everyone else
        _connected(ws)
