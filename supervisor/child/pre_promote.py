"""The ``pre_promote`` command: run after the lock is taken, before serving; it may veto.

For sites that fence the old master's host (its storage path, its network
port, its power) before a new master may serve, as Patroni's pre-promote
hook does. It runs on a thread of its own during the takeover wait, so a
command faster than the wait adds nothing to a failover; the node serves only
once it exited 0, and gives the lock up if it fails or overruns its timeout.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Callable, Mapping

from primacy.supervisor import codes
from primacy.supervisor.machine import roles
from primacy.supervisor.shell.thread_deaths import ThreadDeaths, owned_thread

log = logging.getLogger("primacy.node")


def run_pre_promote(
    command: str,
    timeout_s: float,
    epoch: int,
    environment: Mapping[str, str],
    post: Callable[[roles.Event], None],
    deaths: ThreadDeaths | None = None,
) -> None:
    """Start the command on its own thread; post ``PrePromoteDone`` when it ends."""

    def run() -> None:
        post(roles.PrePromoteDone(epoch, _veto(command, timeout_s, environment)))

    owned_thread(deaths, run, "primacy-pre-promote").start()


def _veto(command: str, timeout_s: float, environment: Mapping[str, str]) -> str | None:
    try:
        process = subprocess.Popen(
            ["sh", "-c", command],
            env={**os.environ, **environment},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group: a timeout kills what it started too
        )
    except OSError as exc:
        reason = f"pre_promote could not run: {exc}"
    else:
        try:
            _, said = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            reason = f"pre_promote did not finish within {timeout_s} s"
        else:
            if process.returncode == 0:
                log.info("%s pre_promote allowed the takeover", codes.PRE_PROMOTE_ALLOWED)
                return None
            tail = said.decode("utf-8", "replace").strip()[-300:]
            reason = f"pre_promote exited with code {process.returncode}"
            reason += f": {tail}" if tail else ""
    log.error("%s %s; giving the lock up", codes.PRE_PROMOTE_VETOED, reason)
    return reason
