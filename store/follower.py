"""The journal follower: a slave's read-only copy of the state a master recovers, kept as written.

A slave follows the journal on the share without writing, fencing or claiming
anything: it reads each batch the master appends, checks it as recovery does,
and applies it to the same ``JournalState`` (queues, pending messages, the
dedupe window) and ``FenceTable`` a recovery builds. At takeover, after its
claim, the new master hands that state to ``recover`` as a checkpoint held in
memory (``hand_over``): recovery then reads only the tail the follower has not
seen, and writes its fence from what it finds after the claim, as always.

The state is a cache, never the authority. It is dropped, and the next
takeover falls back to the full recovery, whenever it may differ from what a
recovery after the claim would build:

- a batch that does not verify with a valid batch after it (damage: recovery
  would skip it, and a follower never skips), a segment header it cannot read;
- a segment that changes under it: another file under the name (inode), shorter
  than what was applied (truncated), the last batch applied no longer there;
- a fence of a later epoch (a new master took over: what it fenced may have
  been applied here);
- a checkpoint newer than the followed state (retention may have removed what
  the follower had not read), a segment holding followed pending messages gone.

After a drop the follower starts again from a full recovery of its own (read
only, nothing quarantined), and keeps that only if it found no damage: a
followed state is always a prefix of the journal without holes. docs/safety.md,
"A hot standby", gives the argument.

NFS: every poll opens each segment it reads afresh through the share port's
``open_revalidated`` (``share/followed_files.py``; close-to-open consistency:
the open revalidates the file's attributes with the server, so the size, and
the bytes up to it, are those the writer's client had flushed when the open was
sent) and lists the directory again (``lookupcache=none`` and the profiles'
attribute-cache settings bound how stale a listing may be; a segment seen one
poll late only delays the follower).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from primacy.share.followed_files import FollowedFiles, PosixFollowedFiles
from primacy.store import format as fmt
from primacy.store import messages
from primacy.store.checkpoint import Checkpoint, SegmentPosition
from primacy.store.errors import UnsupportedJournal
from primacy.store.fences import FenceTable
from primacy.store.follower_files import (
    Followed,
    FollowerFellBack,
    TailSource,
    check_sealed,
    identity_of,
    newest_checkpoint_sequence,
)
from primacy.store.recovery import read_first_batch_fence, recover
from primacy.store.segments import (
    SEGMENT_HEADER_MAX_BYTES,
    BatchAt,
    DamageKind,
    SegmentRef,
    check_batch_at,
    epoch_tails,
    iter_batches,
    list_segments,
    scan_segment,
)
from primacy.store.state import JournalState

Clock = Callable[[], float]
# Sealed segments are checked (the same file, as long) on every this many polls and at handover.
FULL_CHECK_EVERY_POLLS = 20


@dataclass(frozen=True)
class FollowerStatus:
    """What ``/status`` and the metrics show of a follower (immutable; replaced each poll).

    ``mode``: ``starting`` (nothing read yet), ``following``, ``fallen_back`` (no usable
    state: a takeover now runs the full recovery), ``handed_over`` (this node took over,
    from the followed state or, with none, by the full recovery; the follower is stopped).
    """

    mode: str
    last_sequence: int
    position_bytes: int  # journal bytes applied (summed over segments)
    lag_bytes: int  # bytes the segments held at the last poll past what was applied
    lag_s: float  # since when the follower has not been at the journal's end (0: it was)
    fallbacks: int
    last_fallback: str | None
    polls: int

    @property
    def usable(self) -> bool:
        return self.mode == "following"


@dataclass(frozen=True)
class Handover:
    """The followed state for ``recover(start=...)``, and what it was built from."""

    checkpoint: Checkpoint
    bytes_followed: int
    # Segments whose first batch (and any fence in it) the state holds: ``recover``'s
    # ``fences_read``.
    fences_read: frozenset[str] = frozenset()


class JournalFollower:
    """Follows one journal directory read-only; ``poll`` from one thread, ``hand_over`` from
    any (they exclude each other)."""

    def __init__(
        self,
        journal_dir: os.PathLike[str] | str,
        dedupe_window_messages: int,
        clock: Clock = time.monotonic,
        retry_after_s: float = 5.0,
        files: FollowedFiles | None = None,
    ) -> None:
        self.journal_dir = Path(journal_dir)
        # Every read of a followed segment goes through the share port's revalidating open.
        self.files: FollowedFiles = files if files is not None else PosixFollowedFiles()
        self.dedupe_window_messages = dedupe_window_messages
        self._clock = clock
        self._retry_after_s = retry_after_s
        self._lock = threading.Lock()
        self._restart_requested = False
        self._state: JournalState | None = None
        self._fences = FenceTable()
        self._segments: dict[str, Followed] = {}
        self._mode = "starting"
        self._fallbacks = 0
        self._last_fallback: str | None = None
        self._retry_at = 0.0
        self._polls = 0
        self._behind_since: float | None = None
        self._lag_bytes = 0
        self.status = self._status()

    # ------------------------------------------------------------ public

    def poll(self) -> FollowerStatus:
        """Read what was appended since the last poll (or start from a full recovery)."""
        with self._lock:
            if self._restart_requested:
                self._restart_requested = False
                self._forget("starting")
                self._retry_at = 0.0
            if self._mode != "handed_over":
                self._poll()
            return self.status

    def hand_over(self) -> Handover | str:
        """After the claim: read the rest once more, check everything the state rests on, and
        give the state away (the follower then holds nothing until ``restart``). A string
        says why there is nothing to hand over: the caller runs the full recovery. Either
        way this node is taking over and the follower stops: left running, it would follow
        the journal this node now writes, and drop that at its own fence."""
        with self._lock:
            if self._mode == "handed_over":
                return "the followed state was handed over already"
            if self._state is None:
                why = self._last_fallback or "the follower has not read the journal yet"
                self._stop_following()
                return f"no followed state ({why})"
            self._poll(start_if_empty=False, full_check=True)
            if self._state is None:
                self._stop_following()
                return f"the followed state was dropped: {self._last_fallback}"
            state, fences, segments = self._state, self._fences, self._segments
            tails = epoch_tails([f.ref for f in segments.values()])
            positions = {
                name: SegmentPosition(name, f.position, complete=name not in tails)
                for name, f in segments.items()
            }
            epoch = max((f.ref.epoch for f in segments.values()), default=0)
            followed = sum(f.position for f in segments.values())
            fences_read = frozenset(name for name, f in segments.items() if f.fence_read)
            self._forget("handed_over")
            self.status = self._status()
            return Handover(Checkpoint(epoch, state, positions, fences), followed, fences_read)

    def _stop_following(self) -> None:
        self._forget("handed_over")
        self.status = self._status()

    def restart(self) -> None:
        """Follow again from scratch at the next poll (the node is a slave again; what it
        handed over is the store's). Never waits: the role loop calls it."""
        self._restart_requested = True

    # ------------------------------------------------------------ one poll

    def _poll(self, start_if_empty: bool = True, full_check: bool = False) -> None:
        self._polls += 1
        now = self._clock()
        full_check = full_check or self._polls % FULL_CHECK_EVERY_POLLS == 0
        starting = self._state is None
        try:
            if starting:
                if start_if_empty and now >= self._retry_at:
                    self._start()
            else:
                self._follow(full_check)
        except FollowerFellBack as exc:
            self._fall_back(str(exc), now, starting)
        except (OSError, UnsupportedJournal) as exc:
            self._fall_back(f"reading the journal failed: {exc}", now, starting)
        if self._state is not None:
            if self._lag_bytes == 0:
                self._behind_since = None
            elif self._behind_since is None:
                self._behind_since = now
        self.status = self._status()

    def _start(self) -> None:
        """A full recovery, read-only; kept only if it skipped nothing (no damage)."""
        before = {s.name: identity_of(self.files, s) for s in list_segments(self.journal_dir)}
        result = recover(
            self.journal_dir,
            dedupe_window_messages=self.dedupe_window_messages,
            quarantine=False,
            log=False,
        )
        if result.report.damaged:
            first = result.report.damaged[0]
            raise FollowerFellBack(
                f"{first.segment} has a damaged batch at byte {first.offset}: a full recovery "
                "after the claim decides about it"
            )
        segments: dict[str, Followed] = {}
        for ref in result.segments:
            followed = self._open_new(ref)
            if followed is None:
                continue
            if before.get(ref.name) not in (None, followed.identity):
                raise FollowerFellBack(f"segment {ref.name} was replaced while it was read")
            followed.position = max(result.valid_ends.get(ref.name, 0), len(followed.header))
            # Recovery read its first batch's fence into the table (fences_in_force).
            followed.fence_read = followed.position > len(followed.header)
            segments[ref.name] = followed
        self._state, self._fences, self._segments = result.state, result.fences, segments
        self._mode = "following"
        self._lag_bytes = sum(
            max(0, f.size - f.position)
            for f in segments.values()
            if result.fences.limit_for(f.ref.epoch, f.ref.first_sequence) is None
        )
        messages.log(
            logging.INFO,
            messages.FOLLOWER_STARTED,
            f"{self.journal_dir}: {len(segments)} segment(s) to sequence "
            f"{result.state.last_sequence}",
        )

    def _follow(self, full_check: bool) -> None:
        assert self._state is not None
        newest_checkpoint = newest_checkpoint_sequence(self.journal_dir)
        listed = list_segments(self.journal_dir)
        names = {ref.name for ref in listed}
        known_epochs = self._fences.fence_epochs | {f.ref.epoch for f in self._segments.values()}
        tails = epoch_tails(listed)
        lag = 0
        for ref in listed:
            followed = self._segments.get(ref.name)
            if followed is None:
                followed = self._open_new(ref)
                if followed is None:
                    continue  # no header of its own (yet): not followed, recovery judges it
                if ref.epoch not in known_epochs:
                    fence = read_first_batch_fence(ref)
                    if fence is not None:
                        raise FollowerFellBack(f"a fence of epoch {fence[0]} ({ref.name})")
                self._segments[ref.name] = followed
            if followed.sealed:
                if full_check:
                    check_sealed(self.files, followed)
                continue
            lag += self._read_tail(followed, ref.name in tails, full_check)
        for name in [name for name in self._segments if name not in names]:
            if not self._segments[name].sealed:
                raise FollowerFellBack(f"segment {name} is gone before it was read to its end")
            del self._segments[name]  # retired, after being read whole
        self._lag_bytes = lag
        if newest_checkpoint > self._state.last_sequence:
            raise FollowerFellBack(
                f"a checkpoint at sequence {newest_checkpoint} is newer than the followed "
                f"state at {self._state.last_sequence}"
            )

    def _read_tail(self, followed: Followed, is_epoch_tail: bool, full_check: bool) -> int:
        """Apply what ``followed`` gained since the last poll; the bytes left unread."""
        assert self._state is not None
        name = followed.ref.name
        file = self.files.open_revalidated(followed.ref.path)  # NFS revalidates here
        try:
            if file.identity != followed.identity:
                raise FollowerFellBack(f"segment {name} was replaced under the follower")
            if file.size < followed.position:
                raise FollowerFellBack(
                    f"segment {name} is {file.size} bytes, shorter than the "
                    f"{followed.position} already applied (truncated)"
                )
            followed.size = file.size
            if file.size == followed.position and not full_check:
                followed.sealed = not is_epoch_tail
                return 0
            source = TailSource(file, followed.header)
            if followed.last_batch is not None:
                offset, crc = followed.last_batch
                status, header = check_batch_at(source, offset)
                if status is not fmt.BatchStatus.OK or header is None or header.crc32c != crc:
                    raise FollowerFellBack(
                        f"the last batch applied of {name} (byte {offset}) changed under the "
                        "follower"
                    )
            fence_limit = self._fences.limit_for(followed.ref.epoch, followed.ref.first_sequence)
            scan = scan_segment(
                followed.ref,
                source,
                start_offset=followed.position,
                fence_limit=fence_limit,
                is_epoch_tail=is_epoch_tail,
            )
            for damage in scan.damage:
                if damage.kind is not DamageKind.TORN_TAIL:  # a torn tail may be a write under way
                    raise FollowerFellBack(
                        f"{name} bytes {damage.offset}..{damage.offset + damage.length}: "
                        f"{damage.reason}"
                    )
            last: BatchAt | None = None
            for batch, view in iter_batches(source, scan):
                try:
                    records = fmt.record_keys(view)
                except fmt.FormatError as exc:
                    raise FollowerFellBack(f"{name} byte {batch.offset}: {exc}") from None
                fence = any(kind is fmt.RecordType.FENCE for kind, _, _, _ in records)
                if fence and batch.header.epoch not in self._fences.fence_epochs:
                    # a new epoch's fence, seen after its segment's header: see _follow
                    raise FollowerFellBack(f"a fence of epoch {batch.header.epoch} ({name})")
                if batch.offset == len(followed.header) and not fence:
                    followed.fence_read = True  # a first batch without a fence
                for record_type, sequence, destination, message_id in records:
                    self._state.apply(
                        record_type, sequence, destination, message_id, name, batch.offset
                    )
                last = batch
            if last is not None:
                followed.last_batch = (last.offset, last.header.crc32c)
            followed.position = max(followed.position, scan.valid_end)
            if fence_limit is not None:
                # A later epoch fenced it: nothing past the fence will ever count, and
                # bytes there (a stale master's) are no lag.
                followed.sealed = True
                return 0
            left: int = file.size - followed.position
            # Its writer closed it (flushing it to the server) before creating the segment
            # after it, listed before this open: nothing more will count in it.
            followed.sealed = not is_epoch_tail and left == 0
            return left
        finally:
            file.close()

    def _open_new(self, ref: SegmentRef) -> Followed | None:
        """A segment's identity and header, or None if it has no intact header of its epoch."""
        try:
            file = self.files.open_revalidated(ref.path)
        except FileNotFoundError:
            return None
        try:
            identity, size = file.identity, file.size
            head = bytes(file.read(0, min(size, SEGMENT_HEADER_MAX_BYTES)))
        finally:
            file.close()
        try:
            header = fmt.decode_segment_header(head)
        except fmt.FormatError:
            return None
        if header.epoch != ref.epoch:
            return None
        raw = bytes(head[: header.header_len])
        return Followed(ref, identity, raw, header.header_len, None, size)

    # ------------------------------------------------------------ helpers

    def _fall_back(self, reason: str, now: float, starting: bool) -> None:
        """Drop the state. Dropped while following, it is rebuilt at the next poll (what
        changed is read then); a start that failed is tried again after a while, since
        what made it fail (damage) is likely still there."""
        had_state = self._state is not None
        self._forget("fallen_back")
        self._fallbacks += 1
        self._last_fallback = reason
        self._retry_at = now + self._retry_after_s if starting else now
        messages.log(
            logging.WARNING if had_state else logging.INFO,
            messages.FOLLOWER_FELL_BACK,
            f"{reason}; a takeover now runs the full recovery until the follower starts again",
        )

    def _forget(self, mode: str) -> None:
        self._state, self._fences, self._segments = None, FenceTable(), {}
        self._mode = mode
        self._lag_bytes = 0
        self._behind_since = None

    def _status(self) -> FollowerStatus:
        state = self._state
        behind = self._behind_since
        return FollowerStatus(
            mode=self._mode,
            last_sequence=state.last_sequence if state is not None else 0,
            position_bytes=sum(f.position for f in self._segments.values()),
            lag_bytes=self._lag_bytes,
            lag_s=0.0 if behind is None else round(self._clock() - behind, 3),
            fallbacks=self._fallbacks,
            last_fallback=self._last_fallback,
            polls=self._polls,
        )
