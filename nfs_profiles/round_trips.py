"""Real round trips on the share, timed: a lock (through a probe handed in) and an fsync."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.findings import Finding, Severity
from primacy.nfs_profiles.profiles import Profile

LockProbe = Callable[[Path, str], None]
"""Takes (share, lock method); returns if locks exclude, else raises with a one-sentence reason."""

FSYNC_TRIES = 3
_FSYNC_PAYLOAD = b"\0" * 4096


def time_lock_round_trip(share: Path, profile: Profile, lock_probe: LockProbe) -> Finding:
    """Run the lock probe once and time it against half a keepalive period."""
    subject = f"lock round trip ({profile.lock_method})"
    started = time.perf_counter()
    try:
        lock_probe(share, profile.lock_method)
    except Exception as exc:  # the probe's own error type is not ours to import
        return Finding(
            Severity.REFUSED,
            subject,
            str(exc),
            codes.LOCK_ROUND_TRIP_FAILED,
            "the lock on the share is what elects the single master",
            "fix the mount options reported above, or the share's permissions",
        )
    elapsed_ms = (time.perf_counter() - started) * 1000
    budget_ms = profile.timings.lock_keep_alive_period_ms / 2
    message = (
        f"{elapsed_ms:.1f} ms; two descriptors on this node exclude each other "
        "(exclusion across nodes is what the mount options decide)"
    )
    if elapsed_ms > budget_ms:
        return Finding(
            Severity.WARNING,
            subject,
            message,
            codes.LOCK_ROUND_TRIP_SLOW,
            f"a master revalidates every {profile.timings.lock_keep_alive_period_ms} ms "
            f"and needs it to finish well within that (budget {budget_ms:.0f} ms)",
            "check the network and server load, or raise lock_keep_alive_period_ms",
        )
    return Finding(Severity.OK, subject, message)


def time_fsync_round_trip(share: Path, profile: Profile, tries: int = FSYNC_TRIES) -> Finding:
    """Write, fsync and unlink a 4 KiB file in the share ``tries`` times; time the write+fsync."""
    subject = "fsync round trip"
    scratch = share / f".primacy-doctor-{os.uname().nodename}-{os.getpid()}"
    durations_ms: list[float] = []
    try:
        for _ in range(tries):
            started = time.perf_counter()
            # A planted symlink at the name is removed, never followed (no O_TRUNC through it).
            with contextlib.suppress(FileNotFoundError):
                os.unlink(scratch)
            fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, _FSYNC_PAYLOAD)
                os.fsync(fd)
            finally:
                os.close(fd)
            durations_ms.append((time.perf_counter() - started) * 1000)
            os.unlink(scratch)
    except OSError as exc:
        return Finding(
            Severity.REFUSED,
            subject,
            f"failed: {exc.strerror}",
            codes.FSYNC_ROUND_TRIP_FAILED,
            "a master acknowledges a message only once the journal is fsynced on the share",
            f"make {share} writable by this user and check the share's health",
        )
    finally:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
    median_ms, worst_ms = statistics.median(durations_ms), max(durations_ms)
    message = f"{median_ms:.1f} ms median, {worst_ms:.1f} ms max of {tries}"
    budget_ms = profile.timings.lock_keep_alive_period_ms
    if worst_ms > budget_ms:
        return Finding(
            Severity.WARNING,
            subject,
            message,
            codes.FSYNC_ROUND_TRIP_SLOW,
            "every acknowledged write waits for one fsync (group commit), "
            f"and a slower fsync than the keepalive period ({budget_ms} ms) stalls clients",
            "check the server's disks and the network, or use a faster share",
        )
    return Finding(Severity.OK, subject, message)
