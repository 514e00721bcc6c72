"""A node gives the big tables it frees back to the system (cli/allocator.py).

Found by the soak (docs/benchmarks.md, "The soak"): glibc raised its mmap threshold after
the node freed its first big table, later big tables came from the heap, and each rebuild
of the dedupe window's table left a hole of 10 MiB that the heap kept: the master's RSS
stepped up while everything Python held stayed flat. Each test runs a fresh interpreter,
frees a 16 MiB block (glibc's cue to raise its threshold to 16 MiB) and then asks glibc
where a 4 MiB table comes from: its own mapping (given back whole when freed) or the heap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from primacy.cli.allocator import OPERATOR_SETTING
from tests.harness.group import Group, wait_until

if not os.confstr("CS_GNU_LIBC_VERSION"):
    pytest.skip(
        "glibc's allocator is what this pins; this libc is not glibc", allow_module_level=True
    )

_CHILD = r"""
import json, sys
from primacy.cli.allocator import mallinfo2, pin_mmap_threshold

said = pin_mmap_threshold() if sys.argv[1] == "pin" else "left to glibc"
big = bytearray(16 << 20)
del big
mapped_before = mallinfo2()["hblkhd"]
table = bytearray(4 << 20)
mapped = mallinfo2()["hblkhd"] - mapped_before >= 4 << 20
del table
print(json.dumps({"said": said, "mapped": mapped, "left": mallinfo2()["hblkhd"] - mapped_before}))
"""


def _big_table(mode: str, **env: str) -> dict[str, object]:
    clean = {name: value for name, value in os.environ.items() if name != OPERATOR_SETTING}
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, mode],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    answer: dict[str, object] = json.loads(run.stdout)
    return answer


def test_glibc_alone_puts_a_big_table_on_the_heap_after_a_bigger_one_is_freed() -> None:
    """What the node answers to: without the pin, the table lands on the heap."""
    assert _big_table("plain")["mapped"] is False


def test_pinned_a_big_table_is_mapped_and_given_back_when_freed() -> None:
    answer = _big_table("pin")
    assert str(answer["said"]).startswith("mmap threshold pinned at 1 MiB")
    assert answer["mapped"] is True
    assert answer["left"] == 0


def test_an_operators_threshold_is_left_as_it_is() -> None:
    answer = _big_table("pin", **{OPERATOR_SETTING: str(32 << 20)})
    assert answer["said"] == f"mmap threshold left as {OPERATOR_SETTING}={32 << 20} says"
    assert answer["mapped"] is False


def test_a_node_pins_it_when_it_starts(group: Group) -> None:
    node = group.start("n1", "--log-level", "debug")
    wait_until(node.is_master, 30, "n1 to serve")
    assert "allocator: mmap threshold pinned at 1 MiB" in node.log()
