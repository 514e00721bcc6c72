"""Who claimed an epoch, as a process of this kernel, and whether it can still run any code.

A master's claim on the role is a promise its process keeps by answering
``/master`` and serving clients, and a process that can no longer run code of
its own keeps no promise. An epoch's record therefore names its claimant as a
process: the kernel's boot id and the PID namespace (so a PID means the same
process to whoever reads it on the same kernel), the PID and the start time in
clock ticks since boot (so a reused PID is not mistaken for it). A node that
takes over on the same kernel can then see that the previous master has ended
(docs/safety.md, "A master whose process has ended has nothing to outlast").

Everything read from the share is hostile: an identity that is not exactly
what ``this_process`` writes is dropped as the record is decoded
(``share/records.py``), and one that names another kernel or namespace says
nothing here: the caller waits as if it could still run.

Only positive proof ends a claimant. ``/proc`` may hide a live process
(``hidepid=``, systemd's ``ProtectProc=invisible``, a process of another user),
so a PID missing from ``/proc`` proves nothing; that no process has the PID is
asked of the kernel (``kill(PID, 0)`` answers ESRCH), which no mount option
hides. ``/proc`` is read only to learn more about a process that is there (a
reused PID, a zombie, a killed one), and whatever it will not show counts as
a process that may still run.
"""

from __future__ import annotations

import enum
import os
import signal

from primacy.share.records import ProcessIdentity

# include/linux/sched.h: a thread that has started to exit.
PF_EXITING = 0x4
SIGKILL_MASK = 1 << (signal.SIGKILL - 1)


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return file.read(65536).decode(errors="replace")
    except OSError:  # gone meanwhile, or no such process
        return None


def _stat_fields(pid: int | str, tid: int | str | None = None) -> list[str] | None:
    """``/proc/PID[/task/TID]/stat`` from its third field (state) on: the command name,
    in parentheses, may hold spaces and parentheses of its own."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    text = _read(path)
    return None if text is None else text.rpartition(")")[2].split()


def this_process() -> ProcessIdentity | None:
    """This process's identity, as an epoch record carries it; None off Linux."""
    boot_id = (_read("/proc/sys/kernel/random/boot_id") or "").strip()
    try:
        # A /proc of another PID namespace would name other processes by our PIDs.
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    fields = _stat_fields("self")
    if not boot_id or fields is None:
        return None
    # Field 22 of stat: start time after boot.
    return ProcessIdentity(boot_id, namespace, os.getpid(), int(fields[19]))


class Sighting(enum.Enum):
    """What this node can tell of an epoch's claimant."""

    ENDED = "ended"  # proven: it can never run code of its own again
    MAY_RUN = "may run"  # seen, and it may (running, or stopped: SIGCONT resumes it)
    HIDDEN = "hidden"  # its PID is in use, but /proc will not show this node the process
    UNKNOWN = "unknown"  # another kernel or namespace, or no identity this node recognises


def has_ended(identity: ProcessIdentity | None) -> bool:
    """Whether ``identity`` (from an epoch record) names a process of this kernel and PID
    namespace that can never run code of its own again: gone (no process has its PID, or
    another process has it), a zombie, or killed with every thread left exiting or holding
    SIGKILL (blocked in the kernel, on a hung share say). False whenever that cannot be
    shown, a process that ``/proc`` hides from this one included."""
    return sighting(identity) is Sighting.ENDED


def sighting(identity: ProcessIdentity | None) -> Sighting:
    """What can be told of ``identity``'s process from here; ``ENDED`` only on proof."""
    if identity is None:
        return Sighting.UNKNOWN  # the record named no process we could recognise
    ours = this_process()
    if ours is None or (ours.boot_id, ours.pid_namespace) != (
        identity.boot_id,
        identity.pid_namespace,
    ):
        return Sighting.UNKNOWN  # another kernel or namespace: its PIDs mean nothing here
    pid, start = identity.pid, identity.start_ticks
    if pid == ours.pid:
        return Sighting.MAY_RUN  # this very process (a lease lost and taken again)
    if not _pid_in_use(pid):
        return Sighting.ENDED  # the kernel says no process has the PID
    fields = _stat_fields(pid)
    if fields is None:
        return Sighting.HIDDEN  # there, but /proc will not show it (hidepid), or just ended
    if int(fields[19]) != start:
        return Sighting.ENDED  # the PID was reused by a later process
    return Sighting.MAY_RUN if may_run_its_own_code(pid) else Sighting.ENDED


def _pid_in_use(pid: int) -> bool:
    """Whether some process of this PID namespace has ``pid``: signal 0 checks without
    sending. EPERM (another user's process, or a system call filter) is an answer too."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def may_run_its_own_code(pid: int) -> bool:
    """Whether any thread of ``pid`` may still run user code: one that is neither exiting
    nor has a SIGKILL pending. A killed process whose thread is blocked in the kernel
    stays in the process table until the call returns, its descriptors with it, but no
    code of its own runs again. A stopped process (SIGSTOP) may: SIGCONT resumes it, and
    so may one whose threads ``/proc`` will not show."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return _pid_in_use(pid)
    seen = 0
    for tid in threads:
        fields = _stat_fields(pid, tid)
        status = _read(f"/proc/{pid}/task/{tid}/status")
        if fields is None or status is None:
            continue  # this thread is gone, or hidden: judged below by what was seen
        seen += 1
        if fields[0] in ("Z", "X"):
            continue
        pending = 0
        for line in status.splitlines():
            name, _, value = line.partition(":")
            if name in ("SigPnd", "ShdPnd"):
                pending |= int(value.strip(), 16)
        if not (int(fields[6]) & PF_EXITING or pending & SIGKILL_MASK):
            return True
    # Not one thread could be read: gone meanwhile, or unreadable; only the kernel can say.
    return seen == 0 and _pid_in_use(pid)
