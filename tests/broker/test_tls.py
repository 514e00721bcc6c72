"""TLS on the STOMP listener, seen from stock stomp.py clients and raw TLS sockets: encrypted
traffic, mutual TLS, plaintext clients and broken handshakes dropped and counted while the
master serves everyone else, and a certificate rotated on disk without a restart."""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path

import pytest

from primacy.broker.config import BrokerConfig
from primacy.broker.event_loop import EventLoopChoice
from tests.broker.nodes import Masters, eventually
from tests.broker.stomppy import StompPy
from tests.harness.tls_certs import Pki, issue, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


# Both loops: under uvloop the client's first bytes once reached the protocol before the
# handshake (event_loop.PlainBytes), and plaintext clients and refused certificates stayed.
LOOPS: list[EventLoopChoice] = ["asyncio", "uvloop"]


def _tls_config(pki: Pki, mutual: bool = False, loop: EventLoopChoice = "auto") -> BrokerConfig:
    return BrokerConfig(
        stomp_tls_cert=pki.cert,
        stomp_tls_key=pki.key,
        stomp_tls_ca=pki.ca if mutual else None,
        stomp_event_loop=loop,
    )


def _peer_serial(address: tuple[str, int], ca: Path) -> str:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(address, timeout=5) as plain,
        context.wrap_socket(plain, server_hostname=address[0]) as secured,
    ):
        return str(secured.getpeercert()["serialNumber"])


def _stomp_connects_over_tls(
    address: tuple[str, int], ca: Path, cert: tuple[Path, Path] | None
) -> bool:
    """Whether a CONNECT over TLS, with this client certificate, gets CONNECTED."""
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with (
            socket.create_connection(address, timeout=10) as plain,
            context.wrap_socket(plain, server_hostname=address[0]) as secured,
        ):
            secured.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
            return b"CONNECTED" in secured.recv(4096)
    except (ssl.SSLError, ConnectionError):
        return False


def test_stomp_py_over_tls_sends_and_receives(masters: Masters, pki: Pki) -> None:
    master = masters.start(_tls_config(pki))
    client = StompPy(master.address, tls={"ca_certs": str(pki.ca)})
    assert client.send("/queue/secret", "over TLS")
    client.subscribe("/queue/secret", "s")
    assert client.message().body == "over TLS"
    client.close()
    assert master.service.stats()["tls"] is True


@pytest.mark.parametrize("loop", LOOPS)
def test_a_plaintext_client_on_the_tls_port_is_dropped_and_counted(
    masters: Masters, pki: Pki, loop: EventLoopChoice
) -> None:
    master = masters.start(_tls_config(pki, loop=loop))
    assert master.service.loop_kind == loop
    with socket.create_connection(master.address, timeout=10) as plain:
        plain.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        assert b"CONNECTED" not in plain.recv(4096)  # closed (b"") or a TLS alert, no STOMP
    eventually(lambda: master.service.stats()["tls_handshakes_failed"] == 1, "the count")
    eventually(lambda: master.service.stats()["connections_open"] == 0, "the drop")
    client = StompPy(master.address, tls={"ca_certs": str(pki.ca)})
    assert client.send("/queue/q", "everyone else is served")
    client.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_mutual_tls_lets_in_certificates_of_its_ca_only(
    masters: Masters, pki: Pki, loop: EventLoopChoice
) -> None:
    master = masters.start(_tls_config(pki, mutual=True, loop=loop))
    assert master.service.loop_kind == loop
    known = {
        "ca_certs": str(pki.ca),
        "cert_file": str(pki.client_cert),
        "key_file": str(pki.client_key),
    }
    client = StompPy(master.address, tls=known)
    assert client.send("/queue/q", "a known client")
    client.close()
    # Refused clients are raw TLS sockets: under TLS 1.3 the server's refusal of a client
    # certificate arrives after the client's handshake ended, and stomp.py's connect(wait=True)
    # then waits with no timeout (a CI run hung there); a socket with a timeout cannot.
    for cert in ((pki.stranger_cert, pki.stranger_key), None):  # a stranger's, and none at all
        assert not _stomp_connects_over_tls(master.address, pki.ca, cert)
    eventually(lambda: master.service.stats()["tls_handshakes_failed"] == 2, "both counted")


def test_a_certificate_rotated_on_disk_serves_new_connections(
    masters: Masters, pki: Pki, tmp_path: Path
) -> None:
    cert, key = tmp_path / "live.pem", tmp_path / "live.key"
    cert.write_bytes(pki.cert.read_bytes())
    key.write_bytes(pki.key.read_bytes())
    key.chmod(0o600)
    master = masters.start(BrokerConfig(stomp_tls_cert=cert, stomp_tls_key=key))
    before = _peer_serial(master.address, pki.ca)
    early = StompPy(master.address, tls={"ca_certs": str(pki.ca)})
    # A new certificate from the same CA, written the way certbot and friends do: renamed in.
    ca_key = pki.ca.with_suffix(".key")
    new_cert, new_key = issue(tmp_path, "renewed", (pki.ca, ca_key), "IP:127.0.0.1")
    os.replace(new_key, key)
    os.replace(new_cert, cert)
    eventually(lambda: _peer_serial(master.address, pki.ca) != before, "the new certificate")
    assert early.send("/queue/q", "an open connection keeps its session")
    early.close()


def test_logins_over_tls_are_answered_and_the_next_frames_read(
    masters: Masters, pki: Pki, tmp_path: Path
) -> None:
    """Found by trying: the TLS layer can hand the first bytes (the CONNECT) over before
    start_tls returns; the CONNECT then paused reading on the plain transport, and the
    SEND after CONNECTED was never read. Each of these logins must see its RECEIPT."""
    from primacy.broker.users import User, hash_password, save_users
    from primacy.client.producer import Producer

    users = tmp_path / "users.json"
    save_users(users, {"app": User("app", hash_password("app password"))})
    master = masters.start(
        BrokerConfig(stomp_tls_cert=pki.cert, stomp_tls_key=pki.key, stomp_users=users)
    )
    for attempt in range(5):
        producer = Producer(
            f"ssl://127.0.0.1:{master.address[1]}?startupMaxReconnectAttempts=0",
            login="app",
            passcode="app password",
            tls_ca_file=pki.ca,
        )
        producer.send("/queue/q", f"attempt {attempt}".encode())
        producer.close()
        assert producer.failover.reconnects == 0, "a receipt was lost: the client reconnected"
