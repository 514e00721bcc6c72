"""The one place a node's thread death is handled: logged with its code, told to its role loop.

Every thread a node owns runs its work through its ``ThreadDeaths``: the threads the
shell starts (lock I/O, registry, broker stats, child, pre_promote) are made by
``thread``; the HTTP server and the broker's loop, which start their own, report an
exception that ends them to ``died``. No process-wide ``threading.excepthook`` is
installed: with several nodes in one process (the in-memory group of the tests), a
thread's death reaches the node that owns it, and only that one. The node then stops
and exits non-zero (``ThreadDied``) rather than run on without the thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from primacy.supervisor import codes
from primacy.supervisor.shell.node_events import ThreadDied

log = logging.getLogger("primacy.node")


class ThreadDeaths:
    """One node's thread deaths: each logged once with ``codes.THREAD_DIED`` and posted."""

    def __init__(self, node_id: str, post: Callable[[ThreadDied], None]) -> None:
        self._node_id = node_id
        self._post = post

    def died(self, thread: str, error: BaseException) -> None:
        """``thread`` ended by raising ``error`` (from any thread: logging and posting are)."""
        log.error(
            "%s node %s: thread %s died: %r",
            codes.THREAD_DIED,
            self._node_id,
            thread,
            error,
            exc_info=(type(error), error, error.__traceback__),
        )
        self._post(ThreadDied(thread, repr(error)))

    def guarded(self, thread: str, work: Callable[[], object]) -> Callable[[], None]:
        """``work``, reporting an exception that escapes it as the death of ``thread``."""

        def run() -> None:
            try:
                work()
            except BaseException as exc:
                self.died(thread, exc)

        return run

    def thread(self, work: Callable[[], object], name: str) -> threading.Thread:
        """A daemon thread (not started) running ``work``, its death handled here."""
        return threading.Thread(target=self.guarded(name, work), name=name, daemon=True)


def owned_thread(
    deaths: ThreadDeaths | None, work: Callable[[], object], name: str
) -> threading.Thread:
    """A daemon thread (not started) running ``work``: its death handled by ``deaths``, the
    owning node's; a part run without a node (in a test) has none."""
    if deaths is None:
        return threading.Thread(target=work, name=name, daemon=True)
    return deaths.thread(work, name)
