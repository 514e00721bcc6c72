"""What a new master reads after its claim: the tail past its follower's state, or everything.

``JournalStore.open`` calls ``takeover_recovery`` once the epoch is claimed. The
follower (``store/follower.py``) checks what its state rests on once more, after
the claim, and hands it over; recovery starts from it as from a checkpoint held
in memory, reads only what lies past it, and the fence is written from what that
read found. With no state to hand over, the full recovery runs, as it did
before followers existed. Either way the outcome is logged with its code.
"""

from __future__ import annotations

import logging

from primacy.store import messages
from primacy.store.config import StoreConfig
from primacy.store.follower import Handover, JournalFollower
from primacy.store.recovery import RecoveryResult, recover


def takeover_recovery(
    config: StoreConfig, epoch: int, follower: JournalFollower | None
) -> tuple[RecoveryResult, str | None, int]:
    """The recovered journal, why the full recovery ran (None: from the followed state), and
    the bytes read to open it (from the followed state: the valid bytes past it)."""
    handover = follower.hand_over() if follower is not None else "this node follows no journal"
    recovery = recover(
        config.journal_dir,
        dedupe_window_messages=config.dedupe_window_messages,
        quarantine=True,
        start=handover.checkpoint if isinstance(handover, Handover) else None,
        fences_read=handover.fences_read if isinstance(handover, Handover) else (),
    )
    report = recovery.report
    if isinstance(handover, Handover):
        positions = handover.checkpoint.positions
        tail = sum(
            max(0, end - (positions[name].offset if name in positions else 0))
            for name, end in recovery.valid_ends.items()
        )
        messages.log(
            logging.INFO,
            messages.OPENED_FROM_FOLLOWED,
            f"epoch {epoch}: {handover.bytes_followed} bytes followed before the claim; "
            f"after it {tail} bytes past them in {report.segments_read} segment(s) "
            f"({report.bytes_read} bytes read with their headers), read in "
            f"{report.duration_s:.3f} s, to sequence {recovery.state.last_sequence}",
        )
        return recovery, None, tail
    messages.log(
        logging.INFO,
        messages.OPENED_BY_FULL_RECOVERY,
        f"epoch {epoch}: {handover}; {report.segments_read} segment(s), {report.bytes_read} "
        f"bytes, read in {report.duration_s:.3f} s",
    )
    return recovery, handover, report.bytes_read
