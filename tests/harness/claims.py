"""What an exec child's guardian says when it kills the tree on a lapsed claim.

The guardian (supervisor/child/guardian.py) names the claim's end on CLOCK_MONOTONIC,
which every process of the machine shares, so a test can set it against an event it
saw itself (when it stopped the supervisor) instead of timing how long the tree took
to die: the claim is the product's deadline, the guardian's lateness a benchmark's
figure (bench/claim_lapse_load.py).
"""

from __future__ import annotations

import re

from primacy.supervisor import codes
from primacy.supervisor.machine.role_events import GUARDIAN_KILL_LEAD

_LAPSE_KILL = re.compile(
    re.escape(codes.CHILD_CLAIM_LAPSED)
    + r" guardian \d+: the claim lapsed unconfirmed: killing the tree "
    r"\(the claim ended at monotonic ([\d.]+) s; acted -?\d+ ms after\)"
)


def lapsed_claim_ends(log: str) -> list[float]:
    """The claim's end (``time.monotonic`` seconds) of every claim-lapse kill in ``log``."""
    return [float(end) for end in _LAPSE_KILL.findall(log)]


def latest_claim_end(stopped_at: float, keep_alive_s: float) -> float:
    """The latest end a claim may have when its supervisor was stopped at ``stopped_at``.

    A stopped supervisor starts no lease check: the last one started before ``stopped_at``
    and confirmed the child a claim to one keepalive after its start, less the guardian's
    kill lead. So the claim the guardian kills on ended before this, on every host however
    loaded; a claim past it would outlast the one another node's takeover wait covers.
    ``stopped_at`` is read after SIGSTOP is sent, so it is no earlier than the stop."""
    return stopped_at + keep_alive_s * (1 - float(GUARDIAN_KILL_LEAD))
