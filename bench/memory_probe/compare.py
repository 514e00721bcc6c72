"""What a probed master's memory held at each mark of ``bench/soak.py --probe DIR``, and
what grew between two marks.

    .venv/bin/python bench/memory_probe/compare.py DIR                  # the last two marks
    .venv/bin/python bench/memory_probe/compare.py DIR --between 900000 1000000

The table splits the RSS into glibc's heap (in use and free: free heap is RSS that
Python gave back but the allocator kept), chunks glibc mmapped, pymalloc's arenas
and, where the run used ``--trace``, what tracemalloc saw allocated. The difference
lists the source lines whose live allocations grew most between the two marks.
"""

from __future__ import annotations

import argparse
import json
import re
import tracemalloc
from pathlib import Path

MIB = 2**20


def marks(directory: Path) -> dict[int, Path]:
    """mark (messages sent) -> the probe's file stem written at it."""
    found = {}
    for mark_file in directory.glob("mark-*"):
        found[int(mark_file.name.removeprefix("mark-"))] = directory / mark_file.read_text()
    return dict(sorted(found.items()))


def pymalloc_bytes(stats: str) -> int | None:
    """pymalloc's own total (arenas, pools, blocks); absent while tracemalloc wraps it."""
    match = re.search(r"^Total\s*=\s*([\d,]+)", stats, re.MULTILINE)
    return int(match.group(1).replace(",", "")) if match else None


def table(found: dict[int, Path]) -> None:
    print(
        "| messages | RSS | heap in use | heap free | mmapped | pymalloc | traced |\n"
        "| --- | --- | --- | --- | --- | --- | --- |"
    )
    for mark, stem in found.items():
        figures = json.loads(stem.with_suffix(".json").read_text())
        malloc = figures["mallinfo2"]
        pymalloc = pymalloc_bytes(figures["pymalloc"])
        traced = figures.get("traced", {}).get("current")
        cells = [
            figures["rss"],
            malloc["uordblks"],
            malloc["fordblks"],
            malloc["hblkhd"],
            pymalloc,
            traced,
        ]
        shown = " | ".join("-" if cell is None else f"{cell / MIB:.1f}" for cell in cells)
        print(f"| {mark:,} | {shown} |")
    print("(MiB; heap and mmapped from glibc's mallinfo2, pymalloc from sys._debugmallocstats)")


def difference(found: dict[int, Path], before: int, after: int, lines: int) -> None:
    traces = [found[mark].with_suffix(".trace") for mark in (before, after)]
    if not all(trace.exists() for trace in traces):
        print("no tracemalloc snapshots (run bench/soak.py with --trace)")
        return
    old, new = (tracemalloc.Snapshot.load(str(trace)) for trace in traces)
    grown = new.compare_to(old, "lineno")
    total = sum(stat.size_diff for stat in grown)
    print(f"\nlive allocations {before:,} -> {after:,} messages: {total / MIB:+.1f} MiB in all")
    for stat in grown[:lines]:
        frame = stat.traceback[0]
        print(
            f"{stat.size_diff / MIB:+8.2f} MiB {stat.count_diff:+9,} blocks  "
            f"(now {stat.size / MIB:6.1f} MiB)  {frame.filename}:{frame.lineno}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--between", type=int, nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--lines", type=int, default=15, help="source lines to list")
    args = parser.parse_args()
    found = marks(args.directory)
    if len(found) < 2:
        parser.error(f"{args.directory} holds fewer than two marks")
    table(found)
    before, after = args.between or list(found)[-2:]
    for mark in (before, after):
        if mark not in found:
            parser.error(f"no probe at {mark:,} messages (have {', '.join(map(str, found))})")
    difference(found, before, after, args.lines)


if __name__ == "__main__":
    main()
