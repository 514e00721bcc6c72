"""The ``primacy`` command line run as a user runs it: one process to its end, output as text."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# This interpreter's primacy, whichever virtualenv runs the tests.
PRIMACY = (sys.executable, "-m", "primacy.cli")
# The console script operators run, from the same virtualenv.
PRIMACY_SCRIPT = str(Path(sys.executable).with_name("primacy"))


def primacy(
    *args: str,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 120,
    command: Sequence[str] = PRIMACY,
) -> subprocess.CompletedProcess[str]:
    """``primacy ARGS``, waited for at most ``timeout_s``, stdout and stderr captured.

    ``stdin``: its input (without it, it reads /dev/null, never the test's terminal);
    ``env``: variables added to this process's; ``command``: how primacy starts, if not as
    ``PRIMACY`` (the console script, say, or behind a wrapper such as unshare)."""
    return subprocess.run(
        [*command, *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **env} if env is not None else None,
    )
