"""A slave's journal follower thread: reads what the master appends, so a takeover reads the tail.

The thread belongs to the node (started with its parts, stopped at its close) and
polls the follower (``store/follower.py``) every ``journal_follow_interval_ms``.
While this node is master the follower holds nothing (it handed its state to the
journal store at the takeover) and polls are no-ops; ``restart`` makes it follow
from scratch once the node is a slave again. Nothing here writes to the share.
"""

from __future__ import annotations

import logging
import threading

from primacy.store.follower import FollowerStatus, JournalFollower
from primacy.supervisor import codes
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine.roles import Priority
from primacy.supervisor.shell.thread_deaths import ThreadDeaths, owned_thread

log = logging.getLogger("primacy.node")


class JournalFollowing:
    """The follower of one node, and the thread that polls it (none when following is off)."""

    def __init__(self, config: NodeConfig, deaths: ThreadDeaths | None) -> None:
        self._interval_s = config.journal_follow_interval_ms / 1000
        self._node_id = config.node_id
        # A node that never takes the lock never needs the state: it follows nothing.
        follows = self._interval_s > 0 and config.node_priority is not Priority.NEVER
        self.follower = (
            JournalFollower(config.store_config().journal_dir, config.dedupe_window_messages)
            if follows
            else None
        )
        self._stop = threading.Event()
        self._thread = (
            owned_thread(deaths, self._run, "primacy-journal-follower") if self.follower else None
        )

    @property
    def status(self) -> FollowerStatus | None:
        """The follower's last published status (immutable), None if this node follows none."""
        return self.follower.status if self.follower is not None else None

    def start(self) -> None:
        if self._thread is not None:
            self._thread.start()

    def restart(self) -> None:
        """The node is a slave (again): follow from scratch."""
        if self.follower is not None:
            self.follower.restart()

    def close(self, timeout_s: float) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        assert self.follower is not None
        while not self._stop.is_set():
            try:
                self.follower.poll()
            except Exception as exc:  # a cache: never worth the node; start it again
                log.warning(
                    "%s node %s: the journal follower failed (%r); it starts again",
                    codes.JOURNAL_FOLLOWER_FAILED,
                    self._node_id,
                    exc,
                )
                self.follower.restart()
            self._stop.wait(self._interval_s)
