"""Failover URLs as message-broker clients write them, parsed once into typed options.

``failover:(tcp://h1:61613,tcp://h2:61613)?initialReconnectDelay=10&randomize=false``,
``failover://(...)?...``, ``failover:tcp://h1:61613,tcp://h2:61613`` and a
bare ``tcp://host:port`` (or ``stomp://``) are accepted. Option names and
defaults are ActiveMQ's failover transport's (5.6 and later); options of that
transport which make no sense here are accepted and ignored, anything else is
refused, so a typo does not silently fall back to a default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from primacy.client.errors import URL_INVALID, ClientError

DEFAULT_PORT = 61613
_SCHEMES = ("tcp", "stomp")
# How other brokers' clients write a STOMP address over TLS (ActiveMQ: ssl://, stomp+ssl://).
_TLS_SCHEMES = ("ssl", "stomp+ssl", "stomp+tls", "tls")
# ActiveMQ failover options that do not apply to this client (no backup
# connection, no broker-pushed URI updates, resends are always tracked).
IGNORED_OPTIONS = frozenset(
    {
        "backup",
        "backupPoolSize",
        "trackMessages",
        "trackTransactionProducers",
        "maxCacheSize",
        "updateURIsSupported",
        "updateURIsURL",
        "rebalanceUpdateURIs",
        "priorityBackup",
        "priorityURIs",
        "reconnectSupported",
        "warnAfterReconnectAttempts",
        "nested.wireFormat.maxInactivityDuration",
    }
)


class UrlError(ClientError):
    """The URL cannot be understood; the message says which part and why."""

    def __init__(self, message: str) -> None:
        super().__init__(URL_INVALID, message)


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int
    tls: bool = False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ssl' if self.tls else 'tcp'}://{host}:{self.port}"


@dataclass(frozen=True)
class FailoverOptions:
    """ActiveMQ's failover transport options, with its defaults. Durations in milliseconds."""

    initial_reconnect_delay_ms: int = 10
    max_reconnect_delay_ms: int = 30_000
    use_exponential_back_off: bool = True
    back_off_multiplier: float = 2.0
    max_reconnect_attempts: int = -1  # -1 forever; 0 try once, never reconnect; N > 0 N retries
    startup_max_reconnect_attempts: int = -1  # the same, before the first connection succeeded
    randomize: bool = True  # pick addresses in random order rather than as listed
    timeout_ms: int = -1  # how long an operation waits for a connection; -1 for ever

    def __post_init__(self) -> None:
        if self.initial_reconnect_delay_ms < 0 or self.max_reconnect_delay_ms < 0:
            raise UrlError("reconnect delays must not be negative")
        if not math.isfinite(self.back_off_multiplier) or self.back_off_multiplier < 1.0:
            raise UrlError("backOffMultiplier must be a number of at least 1")
        for name in ("max_reconnect_attempts", "startup_max_reconnect_attempts", "timeout_ms"):
            if getattr(self, name) < -1:
                raise UrlError(f"{name} must be -1 (no limit) or at least 0")


@dataclass(frozen=True)
class FailoverUrl:
    addresses: tuple[BrokerAddress, ...]
    options: FailoverOptions = field(default_factory=FailoverOptions)


# URL option name -> (field, type)
_OPTIONS: dict[str, tuple[str, type]] = {
    "initialReconnectDelay": ("initial_reconnect_delay_ms", int),
    "maxReconnectDelay": ("max_reconnect_delay_ms", int),
    "useExponentialBackOff": ("use_exponential_back_off", bool),
    "backOffMultiplier": ("back_off_multiplier", float),
    "reconnectDelayExponent": ("back_off_multiplier", float),  # the older name
    "maxReconnectAttempts": ("max_reconnect_attempts", int),
    "startupMaxReconnectAttempts": ("startup_max_reconnect_attempts", int),
    "randomize": ("randomize", bool),
    "timeout": ("timeout_ms", int),
}


def parse_url(url: str) -> FailoverUrl:
    """Parse a failover URL or a single broker URL; UrlError says what is wrong."""
    text = url.strip()
    if not text.lower().startswith("failover:"):
        return FailoverUrl((_parse_address(text),))
    rest = text[len("failover:") :]
    if rest.startswith("//"):
        rest = rest[2:]
    if rest.startswith("("):
        close = rest.find(")")
        if close < 0:
            raise UrlError(f"{url!r}: the '(' of the address list is never closed")
        inner, query = rest[1:close], rest[close + 1 :]
        if query and not query.startswith("?"):
            raise UrlError(f"{url!r}: expected '?' after the address list, found {query[:20]!r}")
        query = query[1:]
    else:
        # Without parentheses options would be ambiguous with the last address's own.
        inner, query = rest, ""
    addresses = tuple(_parse_address(part) for part in inner.split(",") if part.strip())
    if not addresses:
        raise UrlError(f"{url!r} lists no broker address")
    return FailoverUrl(addresses, _parse_options(query, url))


def _parse_address(text: str) -> BrokerAddress:
    parts = urlsplit(text.strip())
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES + _TLS_SCHEMES:
        raise UrlError(
            f"{text!r}: the scheme must be tcp:// or stomp://, or ssl:// or stomp+ssl:// for TLS"
        )
    if parts.path not in ("", "/"):
        raise UrlError(f"{text!r}: a broker address has no path")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as error:
        raise UrlError(f"{text!r}: {error}") from None
    if not host:
        raise UrlError(f"{text!r} has no host")
    return BrokerAddress(host, port if port is not None else DEFAULT_PORT, scheme in _TLS_SCHEMES)


def _parse_options(query: str, url: str) -> FailoverOptions:
    values: dict[str, object] = {}
    for name, raw in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if name in IGNORED_OPTIONS:
            continue
        if name not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS))
            raise UrlError(f"{url!r}: unknown failover option {name!r}; known options: {known}")
        target, kind = _OPTIONS[name]
        values[target] = _convert(name, raw, kind)
    return FailoverOptions(**values)  # type: ignore[arg-type]


def _convert(name: str, raw: str, kind: type) -> object:
    if kind is bool:
        if raw.lower() not in ("true", "false"):
            raise UrlError(f"option {name}={raw!r} must be true or false")
        return raw.lower() == "true"
    try:
        return kind(raw)
    except ValueError:
        raise UrlError(f"option {name}={raw!r} must be a {kind.__name__}") from None
