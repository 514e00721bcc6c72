"""BrokerService: the STOMP connector as one object the supervisor starts and stops.

``start()`` binds the listening socket in the caller's thread (so an address
in use raises there, as ``OSError``), then runs the broker's asyncio loop on
one thread it owns. ``stop()`` closes the listener and aborts every
connection at once, stops the loop and joins the thread: nothing is left
running. The service never closes the journal store; its owner does, after
``stop()``.

Two ways the broker stops by itself. A failed journal (fenced, write failed) is
reported to ``on_fatal``: the node demotes. An exception escaping a handler on
the loop (a bug) is logged with ``codes.LOOP_FAILED`` and its traceback, the broker
closes every connection, and the loop's thread ends by raising
``BrokerLoopFailed``: its owner hears of it through ``on_thread_death`` (a node, as of
any thread of its that dies, ``supervisor/shell/thread_deaths.py``; without an owner,
``threading.excepthook``) and stops with exit code 1, rather than serve on
with a broker in a state nobody planned for. asyncio would only log such an
exception and drop one connection (an ``OSError`` from a protocol callback it
does not even log), so the loop's exception handler is ours, and the
connection hands its own failures to it (``StompConnection.data_received``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from primacy.broker import codes
from primacy.broker.admission import accept_backlog
from primacy.broker.config import BrokerConfig
from primacy.broker.connection import Admission, StompConnection, shut_down
from primacy.broker.core import Broker
from primacy.broker.event_loop import loop_kind, new_event_loop, shutdown_socket
from primacy.broker.heap_trim import HeapTrim
from primacy.broker.listen_address import listening_socket
from primacy.broker.websocket import new_link
from primacy.store.journal import JournalStore

log = logging.getLogger("primacy.broker")

_STOP_TIMEOUT_S = 10.0
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_STATS_TIMEOUT_S = 2.0


def out_of_descriptors(context: dict[str, Any]) -> bool:
    """Is this asyncio's report of an accept that failed for want of descriptors (or memory)?
    The listener pauses a second and accepts again; the connections it serves go on."""
    error = context.get("exception")
    return (
        isinstance(error, OSError)
        and error.errno in _OUT_OF_RESOURCES
        and "accept" in str(context.get("message", ""))
    )


def tcp_listener(listener: socket.socket) -> socket.socket:
    """The listener as a socket that knows it speaks TCP, so every connection it accepts has
    Nagle's algorithm off.

    asyncio disables Nagle on an accepted socket only when the socket's ``proto`` is
    IPPROTO_TCP, and ``socket.create_server`` leaves it 0, which accepted sockets inherit.
    With Nagle on, a RECEIPT written right after a MESSAGE waited for the client's delayed
    ACK: 40 ms per acknowledgement. Wrapping the descriptor again lets the socket module read
    its real protocol; TCP_NODELAY on the listener, which Linux passes on to accepted
    sockets, is the second guard.
    """
    known = socket.socket(fileno=listener.detach())  # family, type and proto read from the fd
    if known.family in (socket.AF_INET, socket.AF_INET6):
        known.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return known


def listen(address: tuple[str, int], backlog: int) -> socket.socket:
    """A bound listening socket for one of the broker's listeners (STOMP, and STOMP over
    WebSocket): both bind the same way, so what one accepts as an address the other does."""
    return tcp_listener(listening_socket(*address, backlog))


class BrokerLoopFailed(Exception):
    """The broker's loop thread ends with this after an exception escaped a handler."""


class BrokerService:
    """One master's STOMP listener over one open journal store."""

    def __init__(
        self,
        store: JournalStore,
        host: str,
        port: int,
        config: BrokerConfig | None = None,
        websocket: tuple[str, int] | None = None,
    ) -> None:
        self.store = store
        self.host = host
        self.port = port
        self.config = config or BrokerConfig()
        # (host, port) of the STOMP over WebSocket listener (websocket.py), or None.
        self.websocket = websocket
        self.websocket_address: tuple[str, int] | None = None
        # Called once, on the broker's loop thread, when the journal fails (fenced,
        # write failed, closed): every connection is already aborted by then. It
        # must not block; it may call stop().
        self.on_fatal: Callable[[str], None] | None = None
        # Told, on the loop's thread as it ends, of the exception that ends it.
        self.on_thread_death: Callable[[str, BaseException], None] | None = None
        # The figures last read on the loop: one reference, replaced whole, never mutated.
        self._last_stats: dict[str, Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker: Broker | None = None
        self._server: asyncio.Server | None = None
        self._websocket_server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        self._loop_failure: str | None = None  # what escaped a handler, once one did
        self.heap_trim: HeapTrim | None = None  # made on the loop, with the broker

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); with port 0 the port the kernel picked."""
        if self._address is None:
            raise RuntimeError("the broker service is not started")
        return self._address

    def start(self) -> None:
        """Bind, then serve on the service's own thread. Raises OSError if it cannot bind."""
        if self._thread is not None:
            raise RuntimeError("the broker service was already started")
        backlog = accept_backlog(self.config.max_connections)
        listener = listen((self.host, self.port), backlog)
        self._address = listener.getsockname()[:2]
        websocket_listener = None
        if self.websocket is not None:
            try:
                websocket_listener = listen(self.websocket, backlog)
            except OSError:
                listener.close()
                raise
            self.websocket_address = websocket_listener.getsockname()[:2]
        loop = new_event_loop(self.config.stomp_event_loop)
        ready: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run_thread,
            args=(loop, listener, websocket_listener, ready),
            name="primacy-broker",
            daemon=True,
        )
        self._thread.start()
        started = threading.Event()
        loop.call_soon_threadsafe(lambda: ready.add_done_callback(lambda _: started.set()))
        started.wait()
        error = ready.exception()
        if error is not None:
            self.stop()
            raise error
        host, port = self.address
        log.info(
            "%s on %s:%d (epoch %d, %s loop)",
            codes.title(codes.SERVICE_STARTED),
            f"[{host}]" if ":" in host else host,
            port,
            self.store.epoch,
            self.loop_kind,
        )
        if self.websocket_address is not None:
            log.info("%s on %s:%d", codes.title(codes.WEBSOCKET_STARTED), *self.websocket_address)

    @property
    def loop_kind(self) -> str:
        """``uvloop`` or ``asyncio``: the loop this service runs on (``stomp_event_loop``)."""
        if self._loop is None:
            raise RuntimeError("the broker service is not started")
        return loop_kind(self._loop)

    def stop(self) -> None:
        """Close the listener and every connection at once; stop and join the loop thread.

        The loop commits a lone record itself (store/writer.py, ``commit_inline``), and on a
        hung share it hangs there, in the write, the sync or the fencing check, and would run
        no ``_shutdown``. So the journal is told first that the loop commits no more; if it is
        inside a commit, the listeners and every connection are shut down from this thread,
        while the journal holds the loop in it (so the loop closes no descriptor meanwhile),
        and the thread is not waited for: it ends once the share answers."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        stuck = self.store.end_inline_commits(self._shut_from_outside)
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._shutdown)
            except RuntimeError:
                pass  # the loop already stopped
        if thread is threading.current_thread():
            return  # called from on_fatal: the loop stops once this callback returns
        if stuck:
            log.warning(
                "%s: its connections were shut down from the stopping thread; the loop's "
                "thread ends once the share answers",
                codes.title(codes.LOOP_IN_JOURNAL_COMMIT),
            )
            return
        thread.join(_STOP_TIMEOUT_S)
        if thread.is_alive():
            log.error("the broker thread did not stop within %.0f s", _STOP_TIMEOUT_S)
        log.info("%s", codes.title(codes.SERVICE_STOPPED))

    def stats(self) -> dict[str, Any]:
        """Figures for the status endpoint: messages in/out, connections, queue depth.

        The broker's books are read on its own loop and nowhere else (they change under any
        other thread, and a dict that changes size while read raises). A loop that does not
        answer within ``_STATS_TIMEOUT_S`` (busy, stuck), or a read that fails, gives the
        figures last read there (the first when it started serving): never an exception, and
        never a dict ``/status`` cannot show. Once the loop's thread has ended, nothing
        changes the books, and they are read as they were left."""
        broker, loop = self._broker, self._loop
        if broker is None or loop is None:
            return {"running": False}
        thread = self._thread
        if thread is threading.current_thread():
            return self._read_stats(broker)
        if thread is not None and not thread.is_alive():
            return self._read_stats(broker)  # the loop has ended: nothing changes the books now
        answer: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()

        def read() -> None:
            try:
                answer.set_result(self._read_stats(broker))
            except Exception as exc:  # a bug in a figure must not stop the broker's loop
                answer.set_exception(exc)

        try:
            loop.call_soon_threadsafe(read)
            return answer.result(timeout=_STATS_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            pass  # busy or stuck: the last figures
        except RuntimeError as exc:  # the loop is closed, or the read failed
            log.debug("broker figures not read on its loop: %r", exc)
        except Exception as exc:
            log.warning("broker figures could not be read: %r", exc)
        return self._last_stats or {"running": False}

    def _read_stats(self, broker: Broker) -> dict[str, Any]:
        """On the broker's loop only."""
        figures = self._stats(broker)
        self._last_stats = figures
        return figures

    def _stats(self, broker: Broker) -> dict[str, Any]:
        counters = broker.counters
        durables, held, oldest_s = broker.topics.figures(broker)
        return {
            "running": self._server is not None and broker.failure is None,
            "failure": broker.failure,
            "connections_open": len(broker.peers),
            "connections_total": counters.connections_total,
            "messages_in": counters.messages_in,
            "messages_out": counters.messages_out,
            "messages_acked": counters.messages_acked,
            "redeliveries": counters.redeliveries,
            "duplicates_dropped": counters.duplicates_dropped,
            "errors_sent": counters.errors_sent,
            "connections_refused": counters.connections_refused,
            "subscriptions_refused": counters.subscriptions_refused,
            "transactions_refused": counters.transactions_refused,
            "dead_lettered": counters.dead_lettered,
            "messages_expired": counters.messages_expired,
            "temp_queues": len(broker.temp_queues.owners),
            "temp_queue_sends_dropped": broker.temp_queues.sends_dropped,
            "durable_subscriptions": durables,
            "durable_messages_held": held,
            "durable_oldest_age_s": round(oldest_s, 3),
            "topic_messages_dropped": broker.topics.dropped,
            "stomp_auth": "users-file" if broker.authenticator is not None else "none",
            "logins_ok": counters.logins_ok,
            "logins_failed": counters.logins_failed,
            "unauthorized": counters.unauthorized,
            "tls": broker.tls is not None,
            "tls_handshakes_failed": counters.tls_handshakes_failed,
            "sends_held": counters.sends_held,
            "sends_refused_full": counters.sends_refused_full,
            "sends_waiting": broker.backlog.waiting,
            "messages_unacknowledged": broker.backlog.total,
            "destinations": len(broker.book.queues),
            "body_memory_bytes": broker.body_memory_bytes,
            "messages_ready": broker.book.ready_count(),
            "journal_wakeups": broker.journal_waits.wakeups,
        }

    # ---- the loop thread --------------------------------------------------------

    def _run_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        listener: socket.socket,
        websocket_listener: socket.socket | None,
        ready: asyncio.Future[None],
    ) -> None:
        try:
            self._run(loop, listener, websocket_listener, ready)
        except BaseException as exc:
            if self.on_thread_death is None:
                raise  # threading.excepthook
            self.on_thread_death(threading.current_thread().name, exc)

    def _run(
        self,
        loop: asyncio.AbstractEventLoop,
        listener: socket.socket,
        websocket_listener: socket.socket | None,
        ready: asyncio.Future[None],
    ) -> None:
        asyncio.set_event_loop(loop)
        loop.set_exception_handler(self._on_loop_exception)
        try:
            loop.run_until_complete(self._serve(loop, listener, websocket_listener, ready))
            loop.run_forever()
        finally:
            if self._broker is not None:
                self._broker.bodies.close()
                self._broker.expiry.close()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                listener.close()
                if websocket_listener is not None:
                    websocket_listener.close()
        if self._loop_failure is not None:  # logged with its traceback already
            raise BrokerLoopFailed(f"{codes.title(codes.LOOP_FAILED)}: {self._loop_failure}")

    def _on_loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Every exception asyncio catches on this loop: a bug, so the broker stops for good."""
        error = context.get("exception")
        if error is None:  # a notice without an exception ("task destroyed while pending")
            loop.default_exception_handler(context)
            return
        where = context.get("message") or "a callback on the broker's loop failed"
        if out_of_descriptors(context):  # not a bug: asyncio retries the accept in a second
            log.warning("%s: %s", codes.title(codes.OUT_OF_DESCRIPTORS), error)
            return
        log.critical("%s: %s: %r", codes.title(codes.LOOP_FAILED), where, error, exc_info=error)
        if self._loop_failure is not None:
            return
        self._loop_failure = f"{where}: {error!r}"
        if loop.is_closed():
            return  # found after the loop ended (a future collected late): nothing to stop
        if threading.current_thread() is self._thread:
            self._stop_on_bug()
        else:  # a future collected on another thread reports there
            loop.call_soon_threadsafe(self._stop_on_bug)

    def _stop_on_bug(self) -> None:
        assert self._loop_failure is not None
        if self._broker is not None:
            detail = "the broker stopped on an internal error; reconnect to the new master"
            self._broker.halt(self._loop_failure, codes.LOOP_FAILED, detail)
        self._shutdown()

    async def _serve(
        self,
        loop: asyncio.AbstractEventLoop,
        listener: socket.socket,
        websocket_listener: socket.socket | None,
        ready: asyncio.Future[None],
    ) -> None:
        try:
            broker = Broker(self.store, self.config, loop)
            broker.on_fatal = self._fatal
            broker.on_stop_listening = self._close_listener
            self._broker = broker
            counters = broker.counters
            self.heap_trim = HeapTrim(
                loop,
                lambda: counters.messages_in + counters.messages_acked + counters.messages_out,
                self.config.heap_trim_idle_s,
            )
            self.heap_trim.start()
            admission = Admission.of(self.config)
            self._server = await loop.create_server(
                lambda: StompConnection(broker, admission),
                sock=listener,
                backlog=accept_backlog(self.config.max_connections),
            )
            if websocket_listener is not None:  # the same broker and budgets, over WebSocket
                self._websocket_server = await loop.create_server(
                    lambda: new_link(broker, admission),
                    sock=websocket_listener,
                    backlog=accept_backlog(self.config.max_connections),
                )
        except Exception as error:  # reported to start() in the caller's thread
            ready.set_exception(error)
            return
        self._read_stats(broker)  # so a late answer always has figures to fall back on
        ready.set_result(None)

    def _fatal(self, reason: str) -> None:
        callback = self.on_fatal
        if callback is not None:
            callback(reason)

    def _close_listener(self) -> None:
        self._shut_listeners()
        for server in (self._server, self._websocket_server):
            if server is not None:
                server.close()

    def _shut_listeners(self) -> None:
        for server in (self._server, self._websocket_server):
            if server is not None:
                for listener in server.sockets:  # see connection.shut_down
                    shutdown_socket(listener)

    def _shut_from_outside(self) -> None:
        """On a thread other than the loop's, while the loop is held inside a journal commit:
        end the listeners and every connection for their peers. A shutdown is safe from any
        thread and closes no descriptor; the loop closes them once it runs again."""
        self._shut_listeners()
        broker = self._broker
        if broker is not None:
            for peer in list(broker.peers):  # the held loop changes no set
                transport = getattr(peer, "transport", None)  # None once it has closed
                if transport is not None:
                    shut_down(transport)

    def _shutdown(self) -> None:
        assert self._loop is not None
        if self.heap_trim is not None:
            self.heap_trim.stop()
        self._close_listener()
        if self._broker is not None:
            self._broker.abort_all(codes.SHUTTING_DOWN, "the broker is stopping")
            if self._broker.authenticator is not None:
                self._broker.authenticator.close()
        # Next iteration, after the aborted connections' connection_lost callbacks.
        self._loop.call_soon(self._loop.stop)
