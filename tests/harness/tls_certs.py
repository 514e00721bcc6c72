"""Certificates for TLS tests, made with the openssl command line (Debian's ``openssl``)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA's certificate: what clients trust, and what signs client certificates
    cert: Path  # the server's, for 127.0.0.1 and localhost
    key: Path
    client_cert: Path  # signed by ``ca``
    client_key: Path
    stranger_cert: Path  # a client certificate signed by another CA
    stranger_key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
    )  # fmt: skip
    return cert, key


def issue(
    directory: Path, name: str, ca: tuple[Path, Path], san: str | None = None, days: int = 2
) -> tuple[Path, Path]:
    """A certificate for ``name`` signed by ``ca`` (key mode 600), valid for ``san``, for
    ``days`` from now."""
    cert, key, request = (directory / f"{name}{suffix}" for suffix in (".pem", ".key", ".csr"))
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(request),
    )  # fmt: skip
    extensions = directory / f"{name}.ext"
    extensions.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-days", str(days), "-out", str(cert), "-extfile", str(extensions),
    )  # fmt: skip
    key.chmod(0o600)
    return cert, key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "test-ca")
    other_ca = _ca(directory, "other-ca")
    cert, key = issue(directory, "server", ca, "IP:127.0.0.1,DNS:localhost")
    client_cert, client_key = issue(directory, "client", ca)
    stranger_cert, stranger_key = issue(directory, "stranger", other_ca)
    return Pki(ca[0], cert, key, client_cert, client_key, stranger_cert, stranger_key)
