"""Fuzz the STOMP frame parser with a million random, mostly mangled frames.

Run: ``.venv/bin/python bench/stomp_fuzz.py [--cases N] [--seed S]``. Fails
(raises) if the parser raises anything but its own StompProtocolError; prints
how many frames parsed and how many were refused. The same generator runs
20 000 cases in the fast tests and 200 000 under ``-m slow``; the million is run here.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.fuzz_frames import fuzz


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    result = fuzz(args.cases, args.seed)
    elapsed = time.monotonic() - started
    print(
        f"{result.cases:,} cases in {elapsed:.1f} s: {result.frames_parsed:,} frames parsed, "
        f"{result.protocol_errors:,} refused with StompProtocolError, no other exception"
    )


if __name__ == "__main__":
    main()
