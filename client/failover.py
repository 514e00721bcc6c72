"""Follow the master: connect to whichever listed broker accepts, reconnect when it goes.

Only a serving master listens, so "the master" is simply the address that
accepts a STOMP connection. The retry schedule is ActiveMQ's failover
transport's: a pass tries every address once (in random order when
``randomize``); after a failed pass wait ``initialReconnectDelay``, growing by
``backOffMultiplier`` up to ``maxReconnectDelay`` when ``useExponentialBackOff``.
"""

from __future__ import annotations

import logging
import random
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from primacy.client.errors import (
    CONNECTED,
    RECONNECTING,
    ClientTimeout,
    ConnectionLost,
    NoBrokerAvailable,
)
from primacy.client.url import BrokerAddress, FailoverOptions, FailoverUrl, parse_url
from primacy.client.wire import StompSocket

log = logging.getLogger("primacy.client")

Opener = Callable[..., StompSocket]  # StompSocket.open's signature


def reconnect_delays_ms(options: FailoverOptions) -> Iterator[float]:
    """The waits between failed passes over the address list, in milliseconds."""
    delay = float(min(options.initial_reconnect_delay_ms, options.max_reconnect_delay_ms))
    while True:
        yield delay
        if options.use_exponential_back_off:
            delay = min(delay * options.back_off_multiplier, float(options.max_reconnect_delay_ms))


def pass_limit(options: FailoverOptions, connected_before: bool) -> int | None:
    """How many passes over the addresses before giving up; None for no limit.

    ActiveMQ's attempts count reconnects: 0 means one try and no reconnect.
    """
    attempts = (
        options.max_reconnect_attempts
        if connected_before
        else options.startup_max_reconnect_attempts
    )
    return None if attempts < 0 else attempts + 1


class Failover:
    """Owns the current connection; ``current()`` reconnects when there is none."""

    def __init__(
        self,
        url: str | FailoverUrl,
        *,
        on_connect: Callable[[StompSocket], None] | None = None,
        heart_beat_ms: int = 1_000,
        connect_timeout_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        opener: Opener = StompSocket.open,
        login: str | None = None,
        passcode: str | None = None,
        tls_ca_file: str | Path | None = None,
        tls_cert_file: str | Path | None = None,
        tls_key_file: str | Path | None = None,
        client_id: str | None = None,
    ) -> None:
        self.url = parse_url(url) if isinstance(url, str) else url
        self.options = self.url.options
        self.on_connect = on_connect
        self.heart_beat_ms = heart_beat_ms
        self.connect_timeout_s = connect_timeout_s
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._open = opener
        self.login, self.passcode = login, passcode
        # CONNECT's client-id, for durable topic subscriptions; only passed to the opener if set.
        self._extra = {"client_id": client_id} if client_id is not None else {}
        # For ssl:// addresses: the CA to trust (the system's without one), and the client
        # certificate a broker with mutual TLS asks for. Built only when the URL lists one:
        # loading the system's CA store costs every tcp:// client (each `primacy send`) time
        # for nothing.
        self._tls: ssl.SSLContext | None = None
        if any(address.tls for address in self.url.addresses):
            self._tls = ssl.create_default_context(cafile=str(tls_ca_file) if tls_ca_file else None)
            if tls_cert_file is not None:
                self._tls.load_cert_chain(tls_cert_file, tls_key_file)
        self.connection: StompSocket | None = None
        self.address: BrokerAddress | None = None
        self.generation = 0  # increases with every successful (re)connect
        self.reconnects = 0

    def current(self) -> StompSocket:
        while self.connection is None:
            self._connect()
        return self.connection

    def lost(self, reason: str) -> None:
        """Drop the current connection; the next ``current()`` fails over."""
        if self.connection is not None:
            log.warning("%s lost %s: %s; failing over", RECONNECTING, self.address, reason)
            self.connection.close()
            self.connection = None

    def close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.send("DISCONNECT", {})
            except ConnectionLost:
                pass
            self.connection.close()
            self.connection = None

    def _connect(self) -> None:
        limit = pass_limit(self.options, self.generation > 0)
        timeout_ms = self.options.timeout_ms
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        delays = reconnect_delays_ms(self.options)
        passes = 0
        errors: list[str] = []
        while True:
            for address in self._order():
                if self._try(address, errors):
                    return
            passes += 1
            if limit is not None and passes >= limit:
                raise NoBrokerAvailable(
                    f"no broker accepted a connection after {passes} pass(es) over "
                    f"{', '.join(map(str, self.url.addresses))}: {errors[-1]}"
                )
            delay_ms = next(delays)
            if deadline is not None and time.monotonic() + delay_ms / 1000 > deadline:
                raise ClientTimeout(f"no broker accepted a connection within {timeout_ms} ms")
            self._sleep(delay_ms / 1000)

    def _try(self, address: BrokerAddress, errors: list[str]) -> bool:
        try:
            connection = self._open(
                address.host,
                address.port,
                self.connect_timeout_s,
                self.heart_beat_ms,
                tls=self._tls if address.tls else None,
                login=self.login,
                passcode=self.passcode,
                **self._extra,
            )
        except ConnectionLost as error:
            errors.append(str(error))
            return False
        self.connection, self.address = connection, address
        if self.generation:
            self.reconnects += 1
        self.generation += 1
        try:
            if self.on_connect is not None:
                self.on_connect(connection)
        except ConnectionLost as error:
            errors.append(str(error))
            self.lost(str(error))
            return False
        log.info("%s connected to %s", CONNECTED, address)
        return True

    def _order(self) -> list[BrokerAddress]:
        addresses = list(self.url.addresses)
        if self.options.randomize:
            self._rng.shuffle(addresses)
        return addresses
