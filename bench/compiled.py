"""The hot path compiled (mypyc) against the same source in pure Python, in the same run.

Run: ``.venv/bin/python bench/compiled.py [--rounds R] [--messages N] [--seconds S]``.

Every figure is taken twice per round, once with the install's compiled modules and once
with ``PRIMACY_PURE_PYTHON=1`` (store/compiled.py: the same source, run by the
interpreter), in alternating order, each in a fresh process; the ratio printed is
compiled / pure of the medians (below 1: the compiled path needs less):

1. the codec and the record format alone: microseconds to parse a stomp.py SEND of
   1 KiB, to encode a RECEIPT, to encode a one-record batch, to read an eight-record
   batch back (best of five timeit repeats);
2. ``bench/hot_path.py``: the broker's own CPU per receipted SEND, in one process, no
   socket, no sync (one and eight producers);
3. a real node (``primacy run``, as bench/compare_activemq.py starts it): the node's
   CPU per message and the messages per second of stomp.py producers (one and eight)
   awaiting a RECEIPT per persistent message.

Prints figures; asserts nothing. Needs a compiled install (``primacy --version``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.alternating import alternate, print_medians
from bench.message_path import node_figures
from primacy.store.compiled import PURE_PYTHON_VARIABLE, hot_path

ROOT = Path(__file__).resolve().parents[1]
MODES = {"compiled": {PURE_PYTHON_VARIABLE: "0"}, "pure": {PURE_PYTHON_VARIABLE: "1"}}

# Run in a fresh interpreter per mode: prints {figure: microseconds} as JSON.
_CODEC = r"""
import json, timeit
from primacy.broker.frames import Frame, FrameParser, encode
from primacy.store.format import EncodedRecord, RecordType, encode_batch, iter_records
send = encode(Frame.make("SEND", {"destination": "/queue/bench", "receipt": "r-1",
    "persistent": "true", "content-type": "application/octet-stream",
    "content-length": "1024", "message-id": "ID:producer-1-42"}, b"x" * 1024))
parser = FrameParser()
receipt = Frame("RECEIPT", (("receipt-id", "r-1"),))
record = EncodedRecord(RecordType.SEND, 1, b"/queue/bench", b"ID:producer-1-42",
    b"\x01\x00a\x01\x00\x00\x00b", b"x" * 1024)
batch = encode_batch(1, 1, 1, [record] * 8)
figures = {
    "parse a 1 KiB SEND": lambda: parser.feed(send),
    "encode a RECEIPT": lambda: encode(receipt),
    "encode a one-record batch": lambda: encode_batch(1, 1, 1, [record]),
    "read an eight-record batch": lambda: list(iter_records(batch)),
}
print(json.dumps({name: min(timeit.repeat(call, number=20000, repeat=5)) / 20000 * 1e6
                  for name, call in figures.items()}))
"""
_HOT_PATH_LINE = re.compile(r"CPU per message: user (\d+) us, system (\d+) us")


def _env(mode: str) -> dict[str, str]:
    return {**os.environ, **MODES[mode]}


def codec(mode: str) -> dict[str, float]:
    run = subprocess.run(
        [sys.executable, "-c", _CODEC], env=_env(mode), capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(run.stdout)
    return figures


def broker_cpu(mode: str, producers: int, messages: int) -> float:
    """bench/hot_path.py's user + system CPU per message, in microseconds."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "hot_path.py"), "--messages", str(messages),
         "--producers", str(producers)],
        env=_env(mode), capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = _HOT_PATH_LINE.search(run.stdout)
    if found is None:
        raise RuntimeError(f"bench/hot_path.py printed no figure: {run.stdout}{run.stderr}")
    return float(found[1]) + float(found[2])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="of each figure in each mode")
    parser.add_argument("--messages", type=int, default=5000, help="per bench/hot_path.py run")
    parser.add_argument("--seconds", type=float, default=6.0, help="per real-node measurement")
    parser.add_argument("--no-node", action="store_true", help="leave out the real node")
    args = parser.parse_args()
    said = hot_path()
    if not said.startswith("hot path: compiled"):
        sys.exit(f"this install runs pure Python ({said}): nothing to compare")
    print(f"{said}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    root = Path(tempfile.mkdtemp(prefix="primacy-bench-compiled-"))

    def measure(mode: str) -> dict[str, float]:
        figures = codec(mode)
        for producers in (1, 8):
            figures[f"broker CPU per SEND, {producers} producer(s), us"] = broker_cpu(
                mode, producers, args.messages
            )
        if not args.no_node:
            figures.update(node_figures(root, args.seconds, MODES[mode]))
        return figures

    try:
        samples = alternate(list(MODES), args.rounds, measure)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_medians(samples)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
