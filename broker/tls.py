"""Server-side TLS for the STOMP listener and the HTTP endpoint, with certificates rotated live.

``ServerTls`` builds an ``ssl.SSLContext`` from PEM files (a certificate chain
and its key; with a CA file, clients must present a certificate it signed:
mutual TLS). Its listening context calls back at every handshake; when the
certificate or key file changed since the last look (size, time, inode;
looked at once a second at most), a fresh context is built from them and the
handshake goes on with it, so a rotated certificate serves new connections
without a restart, and connections already open keep theirs. A rotation that
fails (a key that does not match, a half-written file) is logged and the last
good certificate stays.

The files are checked like the users file, by ``share/secret_file.py``: each a
regular file (a symlink is refused: name the file itself), owned by root or the
node's user, that nobody else can write; the key one nobody else can read.

``certificate_expiries`` reads when each listener's certificate expires, for /metrics: from
the file, so the figure follows a rotation (the listener serves the new file from its next
handshake). The standard library decodes no certificate file, so the expiry is read from the
DER encoding itself (RFC 5280: ``Certificate``, ``tbsCertificate``, ``validity``).
"""

from __future__ import annotations

import datetime
import logging
import os
import ssl
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from primacy.broker import codes
from primacy.share.secret_file import SecretFileError, check_secret_file

log = logging.getLogger("primacy.broker")

_LOOK_EVERY_S = 1.0


class TlsFilesError(Exception):
    """A certificate, key or CA file cannot be used; the message says which and why."""


class ServerTls:
    def __init__(self, cert: Path, key: Path, ca: Path | None = None) -> None:
        self.cert, self.key, self.ca = cert, key, ca
        self._lock = threading.Lock()
        self._seen = self._identity()
        self._current = self._build()
        self._looked_at = time.monotonic()
        self.rotations = 0
        # What the listener is given: it hands every handshake the newest context.
        self.context = self._build()
        self.context.sni_callback = self._on_handshake

    def _on_handshake(
        self, connection: ssl.SSLObject, _server_name: str | None, _context: ssl.SSLContext
    ) -> None:
        connection.context = self._newest()

    def _newest(self) -> ssl.SSLContext:
        with self._lock:
            now = time.monotonic()
            if now - self._looked_at >= _LOOK_EVERY_S:
                self._looked_at = now
                self._reload_if_changed()
            return self._current

    def _reload_if_changed(self) -> None:
        try:
            identity = self._identity()
            if identity == self._seen:
                return
            self._current = self._build()
            self._seen = identity
            self.rotations += 1
            log.info("%s: %s", codes.title(codes.TLS_ROTATED), self.cert)
        except TlsFilesError as error:
            log.error("%s: %s; the certificate in use stays", codes.title(codes.TLS_REFUSED), error)

    def _identity(self) -> tuple[tuple[int, int, int], ...]:
        files = [self.cert, self.key] + ([self.ca] if self.ca else [])
        return tuple(_identity(path) for path in files)

    def _build(self) -> ssl.SSLContext:
        check_tls_files(self.cert, self.key, self.ca)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert, self.key)
            if self.ca is not None:
                context.load_verify_locations(cafile=self.ca)
                context.verify_mode = ssl.CERT_REQUIRED
        except (OSError, ssl.SSLError) as error:
            raise TlsFilesError(
                f"cannot use the certificate {self.cert} with the key {self.key}"
                + (f" and the CA {self.ca}" if self.ca else "")
                + f": {error}"
            ) from None
        return context


def check_tls_files(cert: Path, key: Path, ca: Path | None) -> None:
    """TlsFilesError unless ``share/secret_file.py`` passes each file: a regular file, root's
    or the node's user's, only its owner can write; the key one nobody else can read either.

    ``ssl`` loads the files by name, so this check and the load are two looks at the
    file; the rotation check (``_identity``) builds a fresh context whenever a file changes.
    """
    for path, what, private in (
        (cert, "TLS certificate", False),
        (key, "TLS key", True),
        (ca, "TLS CA file", False),
    ):
        if path is None:
            continue
        try:
            check_secret_file(path, what, private=private)
        except SecretFileError as error:
            raise TlsFilesError(str(error)) from None


def _identity(path: Path) -> tuple[int, int, int]:
    try:
        info = os.stat(path)
    except OSError as error:
        raise TlsFilesError(f"cannot read {path}: {error.strerror}") from None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


_PEM_BEGIN, _PEM_END = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
_SEQUENCE, _VERSION, _UTC_TIME, _GENERALIZED_TIME = 0x30, 0xA0, 0x17, 0x18


def certificate_expiries(certificates: Mapping[str, Path | None]) -> dict[str, float]:
    """When each listener's certificate expires (its notAfter, Unix seconds), read now from
    its file. A listener without a certificate has none, and so has one whose file cannot be
    read now: the listener keeps serving its last good certificate (a failed rotation is
    logged with TLS_REFUSED), and an alert must not read a half-written file as an expiry."""
    expiries = {}
    for listener, path in certificates.items():
        if path is None:
            continue
        try:
            expiries[listener] = certificate_expiry_unix_s(path)
        except TlsFilesError:
            continue
    return expiries


def certificate_expiry_unix_s(path: Path) -> float:
    """The notAfter of the first certificate of a PEM chain (the server's own), Unix seconds."""
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as error:
        raise TlsFilesError(f"cannot read the TLS certificate {path}: {error.strerror}") from None
    start, end = text.find(_PEM_BEGIN), text.find(_PEM_END)
    if start < 0 or end < start:
        raise TlsFilesError(f"the TLS certificate {path} holds no PEM certificate")
    try:
        der = ssl.PEM_cert_to_DER_cert(text[start : end + len(_PEM_END)])
        return _not_after(der).timestamp()
    except (ValueError, IndexError) as error:
        raise TlsFilesError(
            f"cannot read the expiry of the TLS certificate {path}: {error}"
        ) from None


def _not_after(der: bytes) -> datetime.datetime:
    """Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL,
    serialNumber, signature, issuer, validity SEQUENCE { notBefore, notAfter }, ... }, ... }"""
    _, certificate, _ = _element(der, 0, _SEQUENCE)
    _, at, _ = _element(der, certificate, _SEQUENCE)  # tbsCertificate
    if der[at] == _VERSION:
        at = _element(der, at)[2]
    for _field in ("serialNumber", "signature", "issuer"):
        at = _element(der, at)[2]
    _, validity, _ = _element(der, at, _SEQUENCE)
    not_before_end = _element(der, validity)[2]
    tag, start, end = _element(der, not_before_end)
    text = der[start:end].decode("ascii")
    if tag == _UTC_TIME:  # YYMMDDHHMMSSZ, years 1950-2049 (RFC 5280, 4.1.2.5.1)
        parsed = datetime.datetime.strptime(text, "%y%m%d%H%M%SZ")
        if parsed.year >= 2050:
            parsed = parsed.replace(year=parsed.year - 100)
    elif tag == _GENERALIZED_TIME:  # YYYYMMDDHHMMSSZ
        parsed = datetime.datetime.strptime(text, "%Y%m%d%H%M%SZ")
    else:
        raise ValueError(f"notAfter has tag {tag:#x}, not a time")
    return parsed.replace(tzinfo=datetime.UTC)


def _element(der: bytes, at: int, tag: int | None = None) -> tuple[int, int, int]:
    """The DER element at ``at``: its tag, where its content starts and where it ends."""
    found, length = der[at], der[at + 1]
    if tag is not None and found != tag:
        raise ValueError(f"expected tag {tag:#x} at byte {at}, found {found:#x}")
    start = at + 2
    if length & 0x80:  # long form: the next (length & 0x7f) bytes hold the length
        size = length & 0x7F
        length = int.from_bytes(der[start : start + size], "big")
        start += size
    if start + length > len(der):
        raise ValueError(f"the element at byte {at} runs past the end of the certificate")
    return found, start, start + length
