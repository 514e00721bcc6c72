"""The warm standby's gate: a pipe only the guardian writes, read by the child before the store.

The guardian (``guardian.py``) creates one per child and keeps the write end to
itself; the child inherits the read end at the descriptor named by
``PRIMACY_GATE_FD``. The guardian writes one line, the node's epoch, once the
node is master with a claim still ahead: that line is "open". End of file
means the guardian is gone and the gate will never open. docs/safety.md,
"A warm standby behind a gate", gives the argument.

A wrapper script waits with ``python3 -m primacy.supervisor.child.gate``: it
prints the epoch and exits 0 once the gate opens, exits 1 if it never will::

    PRIMACY_EPOCH=$(python3 -m primacy.supervisor.child.gate) || exit 1
    export PRIMACY_EPOCH
    exec my-broker --data "$PRIMACY_SHARE/broker"
"""

from __future__ import annotations

import os
import sys

GATE_FD_VARIABLE = "PRIMACY_GATE_FD"


def wait(fd: int) -> int | None:
    """Block until the gate on ``fd`` opens: the epoch; None if it never will."""
    line = b""
    while not line.endswith(b"\n"):
        data = os.read(fd, 64)
        if not data:
            return None
        line += data
    return int(line)


def main() -> int:
    name = os.environ.get(GATE_FD_VARIABLE)
    if name is None:
        print(f"{GATE_FD_VARIABLE} is not set: not started behind a gate", file=sys.stderr)
        return 2
    epoch = wait(int(name))
    if epoch is None:
        print("the gate closed for good (the guardian is gone)", file=sys.stderr)
        return 1
    print(epoch, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
