"""Stable message codes the journal logs (PRIMACY-14xx, and 1014); never renumber them.

One declaration per code: the constant, and its meaning in ``TITLES`` (the operator guide's
table repeats it, ``tests/test_message_codes.py`` checks both). ``log`` writes the line.
"""

from __future__ import annotations

import logging

LOG = logging.getLogger("primacy.store")

LAYER = "journal"
NUMBERS = range(1400, 1500)
"""Where a new journal code takes its number. ``TRANSACTION_LOSS_AVERTED`` (1014) is older than
the ranges and keeps its number: it is the one analysts grep for (the counterpart of HA-1014)."""

TRANSACTION_LOSS_AVERTED = "PRIMACY-1014"
TORN_TAIL_CUT = "PRIMACY-1401"
DAMAGED_BATCH_QUARANTINED = "PRIMACY-1402"
FENCING_CHECK_FAILED = "PRIMACY-1403"
MESSAGE_TOO_LARGE = "PRIMACY-1404"
CHECKPOINT_SKIPPED = "PRIMACY-1405"
SEGMENT_RETIRED = "PRIMACY-1406"
JOURNAL_WRITE_FAILED = "PRIMACY-1407"
SEGMENT_HEADER_DAMAGED = "PRIMACY-1408"
FENCE_WRITTEN = "PRIMACY-1409"
CHECKPOINT_WRITTEN = "PRIMACY-1410"
UNSUPPORTED_SEGMENT = "PRIMACY-1411"
UNCLAIMED_EPOCH_SEGMENT = "PRIMACY-1412"
FOLLOWER_STARTED = "PRIMACY-1413"
FOLLOWER_FELL_BACK = "PRIMACY-1414"
OPENED_FROM_FOLLOWED = "PRIMACY-1415"
OPENED_BY_FULL_RECOVERY = "PRIMACY-1416"

TITLES = {
    TRANSACTION_LOSS_AVERTED: "transaction loss averted",
    TORN_TAIL_CUT: "torn journal tail cut off",
    DAMAGED_BATCH_QUARANTINED: "damaged journal batch quarantined",
    FENCING_CHECK_FAILED: "fencing check failed, journal stopped accepting writes",
    MESSAGE_TOO_LARGE: "message refused, larger than max_message_size",
    CHECKPOINT_SKIPPED: "checkpoint unusable, skipped",
    SEGMENT_RETIRED: "segment removed by retention",
    JOURNAL_WRITE_FAILED: "journal write failed, journal stopped accepting writes",
    SEGMENT_HEADER_DAMAGED: "segment header damaged",
    FENCE_WRITTEN: "fence written",
    CHECKPOINT_WRITTEN: "checkpoint written",
    UNSUPPORTED_SEGMENT: "journal segment of an unknown format version, recovery refused",
    UNCLAIMED_EPOCH_SEGMENT: "segment of an epoch nobody claimed, set aside",
    FOLLOWER_STARTED: "journal follower started from a full read-only recovery",
    FOLLOWER_FELL_BACK: "journal follower dropped its state",
    OPENED_FROM_FOLLOWED: "journal opened from the followed state, only the tail read",
    OPENED_BY_FULL_RECOVERY: "journal opened by a full recovery, no followed state used",
}


def text(code: str, detail: str) -> str:
    """The one line an operator sees: code, fixed title, then the specifics."""
    return f"{code} {TITLES[code]}: {detail}"


def log(level: int, code: str, detail: str) -> None:
    LOG.log(level, text(code, detail), extra={"primacy_code": code})
