"""The node's pinned glibc mmap threshold against big blocks on the heap, in the same run.

Run: ``.venv/bin/python bench/allocator.py [--rounds R] [--seconds S]``.

``primacy run`` pins glibc's mmap threshold at 1 MiB (cli/allocator.py) so that the big
tables it frees go back to the system instead of staying as holes in the heap (the
soak's RSS steps). The cost is a ``mmap``/``munmap`` and fresh pages for every block of
1 MiB or more. This measures a real node (bench/message_path.py's ``measure_node``: one
and eight stomp.py producers, a RECEIPT per persistent 1 KiB message) both ways,
alternating, each in a fresh node: as shipped, and with ``MALLOC_MMAP_THRESHOLD_`` at
32 MiB, where every block below 32 MiB comes from the heap (what glibc's own threshold
grows to after freeing big blocks; an operator's setting, which the node leaves alone).
The ratio printed is pinned / heap of the medians. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.alternating import alternate, print_medians
from bench.message_path import node_figures
from primacy.cli.allocator import MMAP_THRESHOLD_BYTES, OPERATOR_SETTING

MODES: dict[str, dict[str, str]] = {
    f"pinned at {MMAP_THRESHOLD_BYTES >> 20} MiB": {},
    "heap below 32 MiB": {OPERATOR_SETTING: str(32 << 20)},
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="of each mode")
    parser.add_argument("--seconds", type=float, default=8.0, help="per measurement")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="primacy-bench-allocator-"))
    try:
        samples = alternate(
            list(MODES), args.rounds, lambda mode: node_figures(root, args.seconds, MODES[mode])
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_medians(samples)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
