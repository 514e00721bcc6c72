"""The top of a py-spy profile: where the broker's CPU time goes, by function.

Reads py-spy's ``--format raw`` output (one collapsed stack and its sample
count per line) and prints the functions with the most samples on top of the
stack (self) and anywhere in it (inclusive), as shares of all samples.

    py-spy record --format raw -r 250 -o broker.raw -- \\
        .venv/bin/python bench/broker.py --seconds 20 --producers 1 --failovers 0
    .venv/bin/python bench/profile_top.py broker.raw --top 15
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def _function(frame: str) -> str:
    """``name (path/to/module.py:line)`` as ``module.py:name``, the line left out."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    return f"{Path(path).name}:{name}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("raw", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in args.raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        functions = [_function(frame) for frame in stack.split(";")]
        own[functions[-1]] += count
        for function in set(functions):
            anywhere[function] += count
    print(f"{total} samples")
    for title, counter in (("self", own), ("inclusive", anywhere)):
        print(f"\n| {title} | share |\n| --- | --- |")
        for function, count in counter.most_common(args.top):
            print(f"| `{function}` | {count / total:.1%} |")


if __name__ == "__main__":
    main()
