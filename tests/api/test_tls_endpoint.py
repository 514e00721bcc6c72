"""The HTTP endpoint over TLS: a real uvicorn server, httpx clients, a CA the test makes."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from primacy.api.app import create_app
from primacy.api.server import ApiServer
from primacy.api.snapshot import StatusSnapshot
from primacy.broker.admission import Budget
from primacy.broker.tls import ServerTls
from tests.harness.group import free_port
from tests.harness.tls_certs import make_pki


def test_the_endpoint_answers_over_tls_and_requires_client_certificates_when_asked(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path / "pki")
    snapshot = StatusSnapshot(
        node="n1", role="master", epoch=3, since_unix_s=0.0, priority="normal"
    )
    for mutual in (False, True):
        port = free_port()
        tls = ServerTls(pki.cert, pki.key, pki.ca if mutual else None)
        server = ApiServer(
            create_app(lambda: snapshot, None, None, None),
            "127.0.0.1",
            port,
            Budget(64, 16),
            tls.context,
        )
        server.start()
        try:
            url = f"https://127.0.0.1:{port}/health"
            trusting = ssl.create_default_context(cafile=str(pki.ca))
            with_certificate = ssl.create_default_context(cafile=str(pki.ca))
            with_certificate.load_cert_chain(pki.client_cert, pki.client_key)
            answer = httpx.get(url, verify=with_certificate if mutual else trusting, timeout=5)
            assert answer.status_code == 200
            with pytest.raises(httpx.HTTPError):
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)  # plaintext
            if mutual:
                with pytest.raises(httpx.HTTPError):
                    httpx.get(url, verify=trusting, timeout=5)  # no client certificate
        finally:
            server.stop()
