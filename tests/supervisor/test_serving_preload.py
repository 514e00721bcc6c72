"""Issue 44: a node loads what its first STOMP listener needs when it starts, not after a claim.

A node's first ``BrokerService.start`` imported uvloop's extension and the ``idna`` codec its
listener's host goes through: 175 to 421 ms of a takeover on a loaded host, between serving
and listening (a later start in the same process: 2 to 17 ms). Run in a fresh interpreter,
as a node starts: what ``sys.modules`` holds there is what a takeover would import.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from primacy.broker.event_loop import resolve

NODE = """
import sys
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.shell.serving import Serving

wanted = ("uvloop", "encodings.idna")
before = [name for name in wanted if name in sys.modules]
config = NodeConfig(node_id="n1", share=sys.argv[1], http="127.0.0.1:1", stomp=sys.argv[2])
Serving(config, lambda event: None)
print(before, [name for name in wanted if name in sys.modules])
"""


@pytest.mark.parametrize("stomp", ["127.0.0.1:61613", None])
def test_a_node_that_serves_stomp_loads_its_first_listeners_modules_at_start(
    tmp_path: Path, stomp: str | None
) -> None:
    arguments = [str(tmp_path)] + ([stomp] if stomp else [])
    code = NODE if stomp else NODE.replace("stomp=sys.argv[2]", "stomp=None")
    found = subprocess.run(
        [sys.executable, "-c", code, *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("]")
    before, after = found[0] + "]", found[1] + "]"
    assert before.strip() == "[]"  # nothing loaded them before the node's own start
    if stomp:
        # uvloop only where the node runs it (not under PRIMACY_STOMP_EVENT_LOOP=asyncio)
        expected = (
            ["uvloop", "encodings.idna"] if resolve("auto") == "uvloop" else ["encodings.idna"]
        )
        assert after.strip() == str(expected)
    else:  # no connector (an exec child only): nothing to load
        assert after.strip() == "[]"
