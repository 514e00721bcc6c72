"""uvicorn's HTTP/1.1 protocol with the guards a public health endpoint needs.

uvicorn bounds connections in all (``limit_concurrency``: a 503 beyond it, to health checks
too) but gives a connection all the time it likes to send its request. So a client that opened
connections and sent half a request each (slow loris) held every slot, and load balancers'
health checks got 503 for as long as it kept going; a cap per address did not stop a host
with four addresses, and a body trickling a byte every 4 s stayed open 22 s (issue 27). Here:

- every connection takes room in the endpoint's ``Admission`` budget, handed in by the
  supervisor (``broker/admission.py``; this package imports nothing of the broker): per
  network of addresses and in all. A connection that has not yet sent its whole request is
  *waiting*, and a newcomer displaces the oldest waiting connection of its own network at its
  limit, or of the network holding the most when the endpoint is full. A health check, which
  sends its request at once, therefore always gets in; a newcomer that cannot is answered 503;
- a whole request, head and body, must arrive within ``REQUEST_TIMEOUT_S`` of the connection
  (or of the previous response): 408, and the connection ends.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

from uvicorn.protocols.http.h11_impl import H11Protocol

# Health checkers send their whole request at once; a second is plenty, five is generous.
REQUEST_TIMEOUT_S = 5.0


class Verdict(Protocol):
    @property
    def admitted(self) -> bool: ...

    @property
    def displaced(self) -> tuple[Any, ...]: ...


class Admission(Protocol):
    """What the endpoint asks of its connection budget (``broker/admission.py``'s ``Budget``)."""

    @property
    def total(self) -> int: ...

    @property
    def per_network(self) -> int: ...

    def take(self, address: str | None, holder: Any, *, waiting: bool = True) -> Verdict: ...

    def settle(self, holder: Any) -> None: ...

    def wait(self, holder: Any) -> None: ...

    def release(self, holder: Any) -> None: ...


def _raw_response(status: int, reason: str, error: str) -> bytes:
    """A whole response written past h11: for a connection refused, or cut off mid-request."""
    body = json.dumps({"error": error}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn creates one per connection, from the class ``admitting`` made for its endpoint."""

    _admission: Admission

    @classmethod
    def admitting(cls, admission: Admission) -> type[GuardedH11Protocol]:
        """The protocol class of one endpoint, whose connections take room in ``admission``."""
        return type("EndpointProtocol", (cls,), {"_admission": admission})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        verdict = self._admission.take(self.client[0] if self.client else None, self)
        for other in verdict.displaced:
            other.displace()
        if not verdict.admitted:  # before a byte of it is read: the others keep their room
            error = (
                f"this endpoint serves at most {self._admission.per_network} connections from "
                f"one network and {self._admission.total} in all; try again shortly"
            )
            transport.write(_raw_response(503, "Service Unavailable", error))
            transport.close()
            return
        self._arm_deadline()

    def displace(self) -> None:
        """Make room for a newer connection: this one has not sent its whole request."""
        self._disarm_deadline()
        self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            # The whole request is here: the application answers it, and it is never displaced.
            self._disarm_deadline()
            self._admission.settle(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._admission.wait(self)  # an idle kept-alive connection waits again
            self._arm_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_deadline()
        self._admission.release(self)
        super().connection_lost(exc)

    def _arm_deadline(self) -> None:
        self._disarm_deadline()
        self._deadline = self.loop.call_later(REQUEST_TIMEOUT_S, self._too_slow)

    def _disarm_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.response_started:
            error = f"the request did not arrive within {REQUEST_TIMEOUT_S:g} s"
            self.transport.write(_raw_response(408, "Request Timeout", error))
        self.transport.close()
