"""uvicorn's HTTP/1.1 protocol with the two guards a public health endpoint needs.

uvicorn bounds connections in all (``limit_concurrency``: a 503 beyond it) but
gives a connection all the time it likes to send its request line and headers.
So a client that opens connections and sends half a request each (slow loris)
held every slot, and load balancers' health checks got 503 for as long as it
kept going (found by trying: 70 such connections, ``/master`` 503 for 26 s).
Here a request's head must arrive within ``HEAD_TIMEOUT_S`` of the connection
(or of the previous response), and one source address may hold at most
``MAX_CONNECTIONS_PER_SOURCE`` connections, so a single misbehaving host can
never take all of them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

# Health checkers send their whole request at once; a second is plenty, five is generous.
HEAD_TIMEOUT_S = 5.0
MAX_CONNECTIONS_PER_SOURCE = 16


class GuardedH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        source = self.client[0] if self.client else None
        same_source = sum(
            1
            for other in self.connections
            if isinstance(other, GuardedH11Protocol)
            and other.client
            and other.client[0] == source
            and not other.transport.is_closing()  # refused ones linger until connection_lost
        )
        if source is not None and same_source > MAX_CONNECTIONS_PER_SOURCE:
            transport.close()  # before a byte of it is read: the others keep their slots
            return
        self._arm_head_deadline()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm_head_deadline()  # a request's head arrived; the app's guard takes over

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()  # the next request of a kept-alive connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(HEAD_TIMEOUT_S, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()
