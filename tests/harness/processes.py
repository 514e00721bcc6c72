"""What the kernel says of a process: whether it may still run code of its own, and its
command line even when its leader thread is already a zombie."""

from __future__ import annotations

import os
import signal

# include/linux/sched.h: a thread that has started to exit.
PF_EXITING = 0x4
SIGKILL_MASK = 1 << (signal.SIGKILL - 1)


def _proc_text(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return file.read().decode(errors="replace")
    except OSError:  # gone meanwhile
        return None


def may_run_its_own_code(pid: int) -> bool:
    """Whether any thread of ``pid`` may still run user code: one that is neither exiting
    nor has a SIGKILL pending. A killed process whose thread is blocked in the kernel (a
    FUSE request that the emulated share holds, say) stays in the process table until the
    call returns, its descriptors with it; but no code of its own runs again, so it
    serves no one (docs/safety.md, "The exec child")."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in threads:
        stat = _proc_text(f"/proc/{pid}/task/{tid}/stat")
        status = _proc_text(f"/proc/{pid}/task/{tid}/status")
        if stat is None or status is None:
            continue
        state, *fields = stat.rpartition(")")[2].split()
        if state in ("Z", "X"):
            continue
        pending = 0
        for line in status.splitlines():
            name, _, value = line.partition(":")
            if name in ("SigPnd", "ShdPnd"):
                pending |= int(value.strip(), 16)
        if not (int(fields[5]) & PF_EXITING or pending & SIGKILL_MASK):
            return True
    return False


def command_line(pid: int) -> str:
    """The process's command line, read through any live thread: a zombie leader has none."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return ""
    for tid in threads:
        text = _proc_text(f"/proc/{pid}/task/{tid}/cmdline")
        if text:
            return text.replace("\0", " ")
    return ""
