"""A client builds its TLS context (and reads its CA and certificate files) only for a URL
that lists an ssl:// address: a tcp:// client loaded the system's CA store for nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from primacy.client.failover import Failover


def test_a_tcp_url_reads_no_tls_file(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    Failover("failover:(tcp://127.0.0.1:1,tcp://127.0.0.1:2)", tls_ca_file=missing)


def test_an_ssl_address_in_the_url_reads_them(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(FileNotFoundError):
        Failover("failover:(tcp://127.0.0.1:1,ssl://127.0.0.1:2)", tls_ca_file=missing)
