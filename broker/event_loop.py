"""The broker's event loop: uvloop where it is installed, asyncio's own where it is not.

uvloop (libuv under asyncio's API) takes less of the interpreter per socket event than
asyncio's selector loop: one producer's round trip gains about a fifth on this code's
benchmarks (docs/benchmarks.md, "The message path (issue 49)"). Both run the same
protocol code; ``stomp_event_loop`` picks one, and tests/broker/test_event_loops.py runs
the same traffic on each.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
from typing import Literal

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]


def uvloop_installed() -> bool:
    try:
        importlib.import_module("uvloop")
    except ImportError:
        return False
    return True


def new_event_loop(choice: EventLoopChoice, *, tls: bool = False) -> asyncio.AbstractEventLoop:
    """A new loop of the kind asked: ``auto`` is uvloop if installed, else asyncio's.
    ``uvloop`` where it is not installed raises ImportError (a setting not honoured
    silently would measure the wrong loop).

    A TLS listener (``tls``) always runs on asyncio's: under uvloop 0.23 a plaintext
    client on the TLS port, or a refused client certificate, left the connection open
    instead of dropping it (three tests of tests/broker/test_tls.py, 2026-11-28), which
    is a way to hold the master's connections; not understood yet, so not risked."""
    if tls or choice == "asyncio" or (choice == "auto" and not uvloop_installed()):
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
