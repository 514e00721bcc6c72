"""A tiny sd_notify client: readiness, status and watchdog pings to systemd, no-op without it.

systemd passes ``NOTIFY_SOCKET`` (a Unix datagram socket path, or ``@name``
for an abstract one) to a ``Type=notify`` service, and ``WATCHDOG_USEC`` /
``WATCHDOG_PID`` when ``WatchdogSec=`` is set. Sending never raises: like
``sd_notify(3)``, a lost notification must not take the node down.

The keepalive loop calls ``watchdog_if_due(now_s)`` after each successful
revalidation, so pings stop by themselves when the loop is stuck (a hung
mount) and systemd kills the node after the watchdog timeout.

The timings are the node's, not the unit's: with ``READY=1`` the node sends
``WATCHDOG_USEC=`` (its ``watchdog_s``, derived from the keepalive), which arms
systemd's watchdog for the service, unless the unit set ``WatchdogSec=`` itself;
and with ``STOPPING=1`` it sends ``EXTEND_TIMEOUT_USEC=`` (its child's grace plus
a lock call), so a unit's ``TimeoutStopSec=`` need not be edited to fit the grace.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

from primacy.share.records import Role
from primacy.supervisor import codes

log = logging.getLogger(__name__)


def _socket_address(value: str | None) -> str | None:
    if not value:
        return None
    if value.startswith("@"):
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    log.warning(
        "%s NOTIFY_SOCKET=%r is neither a path nor @abstract; systemd notifications are off",
        codes.NOTIFY_SOCKET_UNUSABLE,
        value,
    )
    return None


def watchdog_timeout_s(environ: Mapping[str, str] | None = None) -> float | None:
    """systemd's ``WatchdogSec=`` for this process in seconds, or ``None`` when it is off."""
    env = os.environ if environ is None else environ
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    pid = env.get("WATCHDOG_PID")
    if usec <= 0 or (pid and pid != str(os.getpid())):
        return None
    return usec / 1_000_000


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """How often to ping the watchdog: half of ``WatchdogSec=``; ``None`` when it is off."""
    timeout_s = watchdog_timeout_s(environ)
    return None if timeout_s is None else timeout_s / 2


def _usec(seconds: float) -> int:
    return round(seconds * 1_000_000)


class Notifier:
    """Sends notifications to the socket named by ``NOTIFY_SOCKET`` (read once, at creation).

    ``watchdog_s``: the watchdog to ask systemd for at ``READY=1`` (None: none) when the
    unit set none; ``stop_s``: how long a stop may take from ``STOPPING=1`` (None: the
    unit's ``TimeoutStopSec=``).
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        watchdog_s: float | None = None,
        stop_s: float | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self._address = _socket_address(env.get("NOTIFY_SOCKET"))
        self._watchdog_interval_s = watchdog_interval_s(env)
        self._asked_watchdog_s = watchdog_s if self._watchdog_interval_s is None else None
        self._stop_s = stop_s
        self._last_watchdog_s: float | None = None
        self._socket: socket.socket | None = None

    def notify(self, message: str) -> bool:
        """Send one raw message (``KEY=VALUE`` lines); True if it was sent."""
        if self._address is None:
            return False
        try:
            if self._socket is None:
                kind = socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                self._socket = socket.socket(socket.AF_UNIX, kind)
            self._socket.sendto(message.encode(), self._address)
        except OSError as exc:
            log.debug("sd_notify %r to %r failed: %s", message, self._address, exc)
            return False
        return True

    def ready(self) -> bool:
        """The node has its first role; it asks for its watchdog if the unit armed none."""
        if self._asked_watchdog_s is None:
            return self.notify("READY=1")
        sent = self.notify(f"READY=1\nWATCHDOG_USEC={_usec(self._asked_watchdog_s)}")
        if sent:
            self._watchdog_interval_s = self._asked_watchdog_s / 2
        return sent

    def status(self, text: str) -> bool:
        """One line for ``systemctl status``, e.g. the role after a change."""
        return self.notify("STATUS=" + " ".join(text.split()))

    def stopping(self) -> bool:
        if self._stop_s is None:
            return self.notify("STOPPING=1")
        return self.notify(f"STOPPING=1\nEXTEND_TIMEOUT_USEC={_usec(self._stop_s)}")

    def role_changed(self, old: str, new: str, status: str) -> None:
        """What systemd hears of a role change: READY=1 with the node's first role, STOPPING=1
        when it starts to stop, and the new role as the unit's status line."""
        if old == Role.STARTING:
            self.ready()
        if new == Role.STOPPING or (new == Role.STOPPED and old == Role.SLAVE):
            self.stopping()
        self.status(status)

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def watchdog_if_due(self, now_s: float) -> bool:
        """Ping the watchdog if half of ``WatchdogSec=`` has passed since the last ping.

        ``now_s`` is a monotonic clock reading. Returns True if a ping was sent.
        """
        if self._watchdog_interval_s is None or self._address is None:
            return False
        last = self._last_watchdog_s
        if last is not None and now_s - last < self._watchdog_interval_s:
            return False
        self._last_watchdog_s = now_s
        return self.watchdog()

    def close(self) -> None:
        if self._socket is not None:
            sock, self._socket = self._socket, None
            sock.close()
