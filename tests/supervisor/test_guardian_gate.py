"""The warm standby's gate, on a real guardian: opened only on a claim that is ahead when
read, and never by its holder's death (docs/safety.md, "A warm standby behind a gate")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.harness.group import wait_until

Start = Callable[[str], tuple[subprocess.Popen[bytes], int]]


def _wait_on_gate(out: Path) -> str:
    """A shell line that says it waits, waits on the gate, then writes what it got and its
    exit code."""
    gate = f"{sys.executable} -m primacy.supervisor.child.gate"
    return (
        f'touch {out}.waiting; {gate} > {out}.part; echo "rc=$?" >> {out}.part; mv {out}.part {out}'
    )


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[Start]:
    """Starts a gated guardian over a shell line; its stderr goes to tmp_path/guardian.err."""
    started: list[tuple[subprocess.Popen[bytes], int]] = []

    def start(child_shell: str) -> tuple[subprocess.Popen[bytes], int]:
        read_end, write_end = os.pipe()
        with open(tmp_path / "guardian.err", "ab") as err:
            guardian = subprocess.Popen(
                [
                    sys.executable, "-m", "primacy.supervisor.child.guardian",
                    "--control-fd", str(read_end), "--claim-until=-inf", "--gate",
                    "--", "sh", "-c", child_shell,
                ],
                pass_fds=(read_end,),
                stderr=err,
            )  # fmt: skip
        os.close(read_end)
        started.append((guardian, write_end))
        return guardian, write_end

    yield start
    for guardian, control in started:
        os.close(control)  # the guardian kills its tree
        guardian.wait(10)


def test_an_open_read_after_its_claim_waits_for_the_next_claim(
    gated: Start, tmp_path: Path
) -> None:
    out = tmp_path / "gate"
    guardian, control = gated(_wait_on_gate(out))
    wait_until(Path(f"{out}.waiting").exists, 10, "the child to wait on its gate")
    os.write(control, f"open 7 {time.monotonic() - 0.1!r}\n".encode())  # its claim is over
    err = tmp_path / "guardian.err"
    wait_until(lambda: "stays shut" in err.read_text(), 10, "the guardian to read the request")
    assert not out.exists() and guardian.poll() is None  # alive, behind a shut gate
    os.write(control, f"claim {time.monotonic() + 30.0!r}\n".encode())  # the next lease check
    wait_until(out.exists, 10, "the gate to open")
    assert out.read_text() == "7\nrc=0\n"


def test_a_killed_guardian_closes_the_gate_for_good(gated: Start, tmp_path: Path) -> None:
    # The reader escapes the child's parent-death signal (a new session, in the background),
    # so it shows what the gate does when its holder dies: end of file, never "open".
    out = tmp_path / "gate"
    guardian, _ = gated(f"(setsid sh -c '{_wait_on_gate(out)}' &); exec sleep 600")
    wait_until(Path(f"{out}.waiting").exists, 10, "the reader to wait on the gate")
    guardian.send_signal(signal.SIGKILL)
    wait_until(out.exists, 10, "the reader to see the gate closed")
    assert out.read_text() == "rc=1\n"
