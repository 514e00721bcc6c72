"""/metrics of a real node serving STOMP and HTTP over TLS: when each listener's certificate
expires, as openssl reads the files, and a certificate rotated on disk at the next scrape."""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from primacy.api.metrics import NodeMetrics
from primacy.api.snapshot import StatusSnapshot
from tests.harness.group import Group, free_port, wait_until
from tests.harness.tls_certs import issue, make_pki

EXPIRY = "primacy_tls_certificate_expiry_timestamp_seconds"


def openssl_not_after(cert: Path) -> float:
    printed = subprocess.run(
        ["openssl", "x509", "-noout", "-enddate", "-in", str(cert)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    return float(ssl.cert_time_to_seconds(printed.removeprefix("notAfter=")))


def expiries(metrics_text: str) -> dict[str, float]:
    return {
        sample.labels["listener"]: sample.value
        for family in text_string_to_metric_families(metrics_text)
        if family.name == EXPIRY
        for sample in family.samples
    }


def test_a_node_without_tls_exports_no_expiry() -> None:
    slave = StatusSnapshot(node="n1", role="slave", epoch=None, since_unix_s=0, priority="normal")
    assert expiries(NodeMetrics(lambda: slave).render().decode()) == {}
    handed = NodeMetrics(lambda: slave, lambda: {"stomp": 1_795_868_824.0})
    assert expiries(handed.render().decode()) == {"stomp": 1_795_868_824.0}


@pytest.mark.slow
def test_a_node_exports_when_each_listener_s_certificate_expires(
    group: Group, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki")
    ca = (pki.ca, pki.ca.with_suffix(".key"))
    # Different lifetimes, so a listener showing the other's certificate fails the test.
    stomp_cert, stomp_key = issue(tmp_path, "stomp", ca, "IP:127.0.0.1", days=30)
    node = group.start(
        "n1",
        "--stomp", f"127.0.0.1:{free_port()}",
        "--stomp-tls-cert", str(stomp_cert), "--stomp-tls-key", str(stomp_key),
        "--http-tls-cert", str(pki.cert), "--http-tls-key", str(pki.key),
    )  # fmt: skip
    trust = ssl.create_default_context(cafile=str(pki.ca))

    def scraped() -> dict[str, float]:
        try:
            url = f"https://127.0.0.1:{node.port}/metrics"
            return expiries(httpx.get(url, verify=trust, timeout=5).text)
        except httpx.HTTPError:
            return {}

    wait_until(lambda: scraped() != {}, 30, "/metrics over https")
    first = scraped()
    assert first == {"stomp": openssl_not_after(stomp_cert), "http": openssl_not_after(pki.cert)}
    # Renewed the way certbot and friends do: the new files renamed over the old.
    renewed_cert, renewed_key = issue(tmp_path, "renewed", ca, "IP:127.0.0.1", days=90)
    os.replace(renewed_key, stomp_key)
    os.replace(renewed_cert, stomp_cert)
    assert scraped() == {"stomp": openssl_not_after(stomp_cert), "http": first["http"]}
    assert scraped()["stomp"] - first["stomp"] == pytest.approx(60 * 86400, abs=600)
