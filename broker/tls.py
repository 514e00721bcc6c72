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

The files are checked at start like the users file: refused when anyone but
their owner can write them, and the key when anyone else can read it.
"""

from __future__ import annotations

import logging
import os
import ssl
import stat
import threading
import time
from pathlib import Path

from primacy.broker import codes

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
    """TlsFilesError unless each file is a regular file only its owner can write, and the
    key one nobody else can read either."""
    for path, what in ((cert, "certificate"), (key, "key"), (ca, "CA file")):
        if path is None:
            continue
        try:
            info = os.stat(path)
        except OSError as error:
            raise TlsFilesError(f"cannot read the TLS {what} {path}: {error.strerror}") from None
        mode = stat.S_IMODE(info.st_mode)
        if not stat.S_ISREG(info.st_mode):
            raise TlsFilesError(f"the TLS {what} {path} is not a regular file")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise TlsFilesError(f"the TLS {what} {path} is writable by others (mode {mode:04o})")
        if what == "key" and info.st_mode & (stat.S_IRGRP | stat.S_IROTH):
            raise TlsFilesError(
                f"the TLS key {path} is readable by others (mode {mode:04o}); chmod 600 {path}"
            )


def _identity(path: Path) -> tuple[int, int, int]:
    try:
        info = os.stat(path)
    except OSError as error:
        raise TlsFilesError(f"cannot read {path}: {error.strerror}") from None
    return (info.st_ino, info.st_size, info.st_mtime_ns)
