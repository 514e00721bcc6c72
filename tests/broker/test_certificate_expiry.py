"""When a TLS certificate expires, read from its file as /metrics shows it: the same instant
openssl prints, for both encodings of the date, the server's own certificate of a chain."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from primacy.broker.tls import TlsFilesError, certificate_expiries, certificate_expiry_unix_s
from tests.harness.tls_certs import Pki, issue, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def server_certificate(pki: Pki, directory: Path, days: int) -> Path:
    """A server certificate from the test CA, valid ``days`` from now."""
    ca = (pki.ca, pki.ca.with_suffix(".key"))
    return issue(directory, f"server-{days}d", ca, "IP:127.0.0.1", days)[0]


def openssl_not_after(cert: Path) -> float:
    printed = subprocess.run(
        ["openssl", "x509", "-noout", "-enddate", "-in", str(cert)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()  # notAfter=Nov 28 12:27:04 2026 GMT
    return float(ssl.cert_time_to_seconds(printed.removeprefix("notAfter=")))


@pytest.mark.parametrize(
    "days",
    [1, 3650, 10_000],  # 10 000 days ends after 2049: a GeneralizedTime, not a UTCTime
)
def test_the_expiry_is_the_one_openssl_prints(pki: Pki, tmp_path: Path, days: int) -> None:
    cert = server_certificate(pki, tmp_path, days)
    assert certificate_expiry_unix_s(cert) == openssl_not_after(cert)


def test_a_chain_gives_the_server_certificate_s_expiry(pki: Pki, tmp_path: Path) -> None:
    server = server_certificate(pki, tmp_path, 30)
    chain = tmp_path / "chain.pem"
    chain.write_text(server.read_text() + pki.ca.read_text())  # the CA's ends sooner: 2 days
    assert certificate_expiry_unix_s(chain) == openssl_not_after(server)


def test_listeners_without_a_readable_certificate_have_no_expiry(pki: Pki, tmp_path: Path) -> None:
    torn = tmp_path / "torn.pem"
    text = pki.cert.read_text()
    torn.write_text(text[: len(text) // 2])  # a rotation caught half-written
    garbled = tmp_path / "garbled.pem"
    garbled.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    expiries = certificate_expiries(
        {
            "stomp": pki.cert,
            "http": None,
            "torn": torn,
            "garbled": garbled,
            "gone": tmp_path / "gone.pem",
        }
    )
    assert expiries == {"stomp": openssl_not_after(pki.cert)}
    with pytest.raises(TlsFilesError, match="holds no PEM certificate"):
        certificate_expiry_unix_s(torn)
    with pytest.raises(TlsFilesError, match="cannot read the expiry"):
        certificate_expiry_unix_s(garbled)
