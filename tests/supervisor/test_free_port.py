"""free_port's ports are unique across the processes that draw them (two test workers once
drew the same one: a slave binds STOMP only when promoted, and the other bound it first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DRAWS = 300

_DRAW = f"""
import json
from primacy.cli.localgroup import free_port
print(json.dumps([free_port() for _ in range({DRAWS})]))
"""


def test_two_processes_never_get_the_same_port(tmp_path: Path) -> None:
    # Reservations live in the temporary directory; this test gets a fresh one. Without
    # them, two draws of 300 among 12 000 ports share about 7 (none: 1 run in 1 800).
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    drawers = [
        subprocess.Popen([sys.executable, "-c", _DRAW], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    drawn = [set(json.loads(drawer.communicate(timeout=120)[0])) for drawer in drawers]
    assert all(len(ports) == DRAWS for ports in drawn)
    assert drawn[0].isdisjoint(drawn[1]), sorted(drawn[0] & drawn[1])
    assert len(list(tmp_path.glob("primacy-free-ports-*/*"))) == 2 * DRAWS
