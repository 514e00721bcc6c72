"""glibc's allocator held to give a long-lived node's big freed tables back to the system.

glibc serves an allocation of 128 KiB or more with its own ``mmap``, returned to the system
when it is freed, but raises that threshold to the size of each such block freed (up to
32 MiB). Once the node has freed one big table (Python rebuilds the dedupe window's table
every ~250 000 messages: a 10 MiB table and a 4 MiB node array), the next ones come from
the heap, and when freed they stay there as holes the heap cannot shrink past: measured
in ``bench/soak.py --probe``, the master's RSS rose 104 -> 108 -> 118 MiB over a million
messages while everything Python held stayed flat; all of the rise was glibc's free heap
(docs/benchmarks.md, "The soak").
Pinning the threshold stops the raise: blocks from 1 MiB up are mapped and unmapped as they
come and go. 1 MiB, not glibc's first 128 KiB: asyncio reads a socket into a fresh 256 KiB
buffer for every read, which should stay on the heap.
"""

from __future__ import annotations

import ctypes
import os

MMAP_THRESHOLD_BYTES = 1 << 20
_M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>
OPERATOR_SETTING = "MALLOC_MMAP_THRESHOLD_"  # glibc reads it at start-up; it wins over ours


def pin_mmap_threshold() -> str:
    """Pin glibc's mmap threshold at ``MMAP_THRESHOLD_BYTES`` unless the operator set one;
    returns what was done, for the node's debug log."""
    if OPERATOR_SETTING in os.environ:
        return f"mmap threshold left as {OPERATOR_SETTING}={os.environ[OPERATOR_SETTING]} says"
    try:
        libc_version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        libc_version = None
    if not libc_version:
        return "mmap threshold left alone: not glibc"
    if not ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES):
        return "mmap threshold left alone: glibc refused it"
    return f"mmap threshold pinned at {MMAP_THRESHOLD_BYTES >> 20} MiB ({libc_version})"


_MALLINFO2_FIELDS = (
    "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
    "fsmblks", "uordblks", "fordblks", "keepcost",
)  # fmt: skip


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS]


def mallinfo2() -> dict[str, int]:
    """glibc's own account of this process's heap (``uordblks`` in use, ``fordblks`` free)
    and of its mapped blocks (``hblkhd``): for the memory probe and the tests, glibc only."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {name: int(getattr(info, name)) for name in _MALLINFO2_FIELDS}
