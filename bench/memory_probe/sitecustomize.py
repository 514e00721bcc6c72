"""Loaded into a primacy node by ``bench/soak.py --probe DIR`` (this folder on PYTHONPATH):
on SIGUSR2 the node writes what its memory holds, so a step in its RSS can be traced to
what allocated it.

Does nothing unless ``PRIMACY_MEMORY_PROBE`` names a directory, so a process that inherits
the environment without being a node under study is untouched. Each SIGUSR2 writes
``<pid>-<n>.json``: RSS, glibc's ``mallinfo2`` (heap in use and free, mmapped chunks) and
pymalloc's arena statistics; with ``PRIMACY_MEMORY_PROBE_TRACE=1`` tracemalloc runs from
start-up and ``<pid>-<n>.trace`` holds its snapshot (``bench/memory_probe/compare.py``
reads them). A benchmark's tool, not the product's: the node does not know it is there.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import tempfile
import tracemalloc
from pathlib import Path
from types import FrameType


def _pymalloc_stats() -> str:
    """``sys._debugmallocstats`` writes to the C stderr; catch it in a file."""
    with tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(caught.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        return caught.read().decode(errors="replace")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _install(directory: Path) -> None:
    from primacy.cli.allocator import mallinfo2  # only in a probed node

    numbers = itertools.count(1)

    def probe(signum: int, frame: FrameType | None) -> None:
        stem = directory / f"{os.getpid()}-{next(numbers)}"
        figures: dict[str, object] = {"rss": _rss_bytes(), "mallinfo2": mallinfo2()}
        if tracemalloc.is_tracing():
            current, peak = tracemalloc.get_traced_memory()
            figures["traced"] = {"current": current, "peak": peak}
            tracemalloc.take_snapshot().dump(str(stem.with_suffix(".trace")))
        figures["pymalloc"] = _pymalloc_stats()
        partial = stem.with_suffix(".partial")
        partial.write_text(json.dumps(figures))
        partial.rename(stem.with_suffix(".json"))  # the bench waits for this name

    signal.signal(signal.SIGUSR2, probe)


_directory = os.environ.get("PRIMACY_MEMORY_PROBE")
if _directory and "primacy.cli" in sys.orig_argv:  # python -m primacy.cli run ...
    if os.environ.get("PRIMACY_MEMORY_PROBE_TRACE") == "1":
        tracemalloc.start(1)
    _install(Path(_directory))
