"""The broker's event loop: uvloop where it is installed, asyncio's own where it is not.

uvloop (libuv under asyncio's API) takes less of the interpreter per socket event than
asyncio's selector loop: one producer's round trip gains about a fifth on this code's
benchmarks (docs/benchmarks.md, "The message path (issue 49)"). Both run the same
protocol code; ``stomp_event_loop`` picks one, and tests/broker/test_event_loops.py runs
the same traffic on each.
"""

from __future__ import annotations

import asyncio
import codecs
import importlib
import os
import socket
import ssl
from typing import Literal

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
EventLoopKind = Literal["uvloop", "asyncio"]
# What ``auto`` means when set: a whole test suite, or a node, on one loop without a config
# edit (``PRIMACY_STOMP_EVENT_LOOP=asyncio``); an explicit ``stomp_event_loop`` wins.
ENVIRONMENT_VARIABLE = "PRIMACY_STOMP_EVENT_LOOP"


def uvloop_installed() -> bool:
    try:
        importlib.import_module("uvloop")
    except ImportError:
        return False
    return True


def resolve(choice: EventLoopChoice) -> EventLoopKind:
    """The loop ``choice`` stands for: ``auto`` is the one ``PRIMACY_STOMP_EVENT_LOOP``
    names if it is set, else uvloop if installed, else asyncio's. Any other value of the
    variable raises ValueError (a typo must not run the suite on the loop it meant to avoid)."""
    if choice == "uvloop" or choice == "asyncio":
        return choice
    named = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if named == "uvloop":
        return "uvloop"
    if named == "asyncio":
        return "asyncio"
    if named:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}={named!r}: expected uvloop or asyncio")
    return "uvloop" if uvloop_installed() else "asyncio"


def preload(choice: EventLoopChoice) -> None:
    """Import now what a first listener on a loop of ``choice`` imports: uvloop's extension
    and the ``idna`` codec a listener's host name goes through. A slave calls this at its
    start, so its takeover does not (issue 44: a node's first ``BrokerService.start`` took
    175 to 421 ms on a loaded host, the next ones 2 to 17 ms; with these loaded, 2 to 10)."""
    codecs.lookup("idna")
    if resolve(choice) == "uvloop":
        uvloop_installed()


def new_event_loop(choice: EventLoopChoice) -> asyncio.AbstractEventLoop:
    """A new loop of the kind asked (``resolve``). ``uvloop`` where it is not installed
    raises ImportError (a setting not honoured silently would measure the wrong loop).
    TLS listeners too: ``start_tls`` below."""
    if resolve(choice) == "asyncio":
        return asyncio.new_event_loop()
    uvloop = importlib.import_module("uvloop")
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def loop_kind(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: what a loop is, for the log and the tests."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def shutdown_socket(sock: socket.socket) -> None:
    """``shutdown(SHUT_RDWR)`` of a loop's socket, ignoring a socket already gone. uvloop hands
    out stand-ins without ``shutdown``: the same call on a duplicate of the descriptor ends
    the one connection both refer to."""
    try:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except TypeError:  # uvloop's PseudoSocket: "transport sockets do not support shutdown()"
            with socket.socket(fileno=os.dup(sock.fileno())) as copy:
                copy.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class PlainBytes:
    """What a protocol read on the plain transport before ``start_tls`` put its TLS layer
    under it: the client's first TLS bytes (its hello), or a plaintext client's frames.

    uvloop starts reading an accepted socket right after ``connection_made`` whatever that
    did (its ``_call_connection_made``), and reads before the task that calls ``start_tls``
    first runs; asyncio reads only after that. Bytes taken by the protocol were lost to the
    handshake, which waited for them until its timeout: under uvloop a plaintext client and
    a refused certificate stayed connected that long, and a good client could time out."""

    def __init__(self) -> None:
        self.held: list[bytes] | None = []  # None once the TLS layer reads the socket

    def take(self, data: bytes, transport: asyncio.Transport | None) -> bool:
        """Keep ``data`` if it came before the TLS layer (and read no more until then)."""
        if self.held is None:
            return False
        self.held.append(data)
        if transport is not None:  # bytes come only through a transport: always one here
            transport.pause_reading()  # start_tls resumes reading once its layer is in place
        return True


async def start_tls(
    loop: asyncio.AbstractEventLoop,
    plain: asyncio.Transport,
    protocol: asyncio.BaseProtocol,
    context: ssl.SSLContext,
    timeout_s: float,
    early: PlainBytes,
) -> asyncio.Transport | None:
    """The server side of ``loop.start_tls``, ``early``'s bytes handed to the TLS layer
    before anything read after them. ``start_tls``' first step puts the layer under the
    plain transport and schedules its ``connection_made`` and the resumed reading; the call
    scheduled here, which runs right after that step, schedules the hand-over behind those
    two, so the three run in one pass of the loop, before its next read (callbacks run in
    the order they were scheduled, on both loops)."""
    handshake = loop.create_task(
        loop.start_tls(plain, protocol, context, server_side=True, ssl_handshake_timeout=timeout_s)
    )
    loop.call_soon(_hand_over, loop, plain, protocol, early)
    return await handshake


def _hand_over(
    loop: asyncio.AbstractEventLoop,
    plain: asyncio.Transport,
    protocol: asyncio.BaseProtocol,
    early: PlainBytes,
) -> None:
    held, early.held = early.held or [], None
    layer = plain.get_protocol()
    if held and layer is not protocol and not plain.is_closing():
        loop.call_soon(_feed, layer, b"".join(held))


def _feed(layer: asyncio.BaseProtocol, data: bytes) -> None:
    """``data`` to the TLS layer as its transport gives it: both loops' layers are buffered
    protocols (``get_buffer``, then ``buffer_updated``; uvloop's without the base class)."""
    view = memoryview(data)
    while view:
        buffer = memoryview(layer.get_buffer(len(view)))  # type: ignore[attr-defined]
        size = min(len(buffer), len(view))
        buffer[:size] = view[:size]
        layer.buffer_updated(size)  # type: ignore[attr-defined]
        view = view[size:]
