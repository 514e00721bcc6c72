"""A process's command line, even when its leader thread is already a zombie; whether it
may still run code of its own is the product's rule (``primacy.locker.claimant``)."""

from __future__ import annotations

import os

from primacy.locker.claimant import may_run_its_own_code

__all__ = ["command_line", "may_run_its_own_code"]


def command_line(pid: int) -> str:
    """The process's command line, read through any live thread: a zombie leader has none."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return ""
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/cmdline", "rb") as file:
                text = file.read().decode(errors="replace")
        except OSError:
            continue
        if text:
            return text.replace("\0", " ")
    return ""
