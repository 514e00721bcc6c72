"""What the replay has read of a journal: the state file in its output directory, and what the
next incremental run reads from it.

The records table is ``OUT/records/load=N/date=D/``: each run adds its rows as
new loads (directories) and never changes a load it did not write. The state
file lists the loads that make up the table and, per segment, how far its rows
are settled. It is written after the loads it lists (temp file, fsync, rename),
so a run that dies before that leaves loads the state does not list; the next
run deletes them first and reads those bytes again. No record is counted twice.

A run writes two loads: the settled rows, and the provisional ones (a
segment's open end, see ``segment_reader``), which the next run drops and reads
again. This module is free of Spark; ``spark.replay`` does the reading and
writing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import portalocker

from primacy.spark.journal_plan import OptionError, SegmentPlan

STATE_FILE_NAME = "replay-state.json"
STATE_VERSION = 1
RECORDS_DIR_NAME = "records"
_LOAD_DIR = re.compile(r"load=([0-9]+)")


class StateError(OptionError):
    """An output directory whose state cannot be continued from."""


LOCK_FILE_NAME = ".replay.lock"


class OutputBusy(Exception):
    """Another replay is writing the same output directory."""


@contextmanager
def writing(out: str | Path) -> Iterator[None]:
    """Hold ``out`` for one run: a second replay into it fails at once (OutputBusy), before
    its Spark starts, instead of both rewriting the tables and the state under each other.
    An exclusive ``flock`` on a file in ``out``: the kernel drops it when its holder dies."""
    Path(out).mkdir(parents=True, exist_ok=True)
    with open(Path(out) / LOCK_FILE_NAME, "a") as handle:
        try:
            portalocker.lock(handle, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except portalocker.exceptions.LockException as exc:
            raise OutputBusy(
                f"another replay is writing {out} (it holds {LOCK_FILE_NAME} there); "
                "wait for it to finish, or give another --out"
            ) from exc
        yield


@dataclass(frozen=True)
class SegmentRead:
    """How much of one segment the records table holds, and what it was classified with."""

    epoch: int
    first_sequence: int
    size_read: int  # the segment's planned length when last read
    settled_up_to: int  # rows starting before this offset never change; later ones may
    provisional: bool  # whether rows from settled_up_to on are in the open load
    fence_limit: int | None
    is_epoch_tail: bool


@dataclass(frozen=True)
class ReplayState:
    """The records table of one output directory: its loads, and what they hold of each
    segment. Segments that retention removed stay listed: their rows stay in the table."""

    share: str
    loads: tuple[int, ...] = ()
    open_load: int | None = None  # the load of provisional rows, which the next run replaces
    next_load: int = 1
    segments: dict[str, SegmentRead] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "share": self.share,
            "loads": list(self.loads),
            "open_load": self.open_load,
            "next_load": self.next_load,
            "segments": {name: asdict(read) for name, read in sorted(self.segments.items())},
        }

    @classmethod
    def from_json(cls, data: Any) -> ReplayState:
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise ValueError(f"not a version {STATE_VERSION} replay state")
        state = cls(
            share=str(data["share"]),
            loads=tuple(int(n) for n in data["loads"]),
            open_load=None if data["open_load"] is None else int(data["open_load"]),
            next_load=int(data["next_load"]),
            segments={str(k): SegmentRead(**v) for k, v in data["segments"].items()},
        )
        if any(n >= state.next_load for n in state.loads) or (
            state.open_load is not None and state.open_load not in state.loads
        ):
            raise ValueError("its loads do not add up")
        return state


def state_path(out: str | Path) -> Path:
    return Path(out) / STATE_FILE_NAME


def records_dir(out: str | Path) -> Path:
    return Path(out) / RECORDS_DIR_NAME


def load_dir(out: str | Path, load: int) -> Path:
    return records_dir(out) / f"load={load}"


def read_state(out: str | Path, share: str) -> ReplayState | None:
    """The state of ``out``, None if it has none; StateError if it is damaged, of another
    share, or lists a load that is not there."""
    path = state_path(out)
    again = "run without --incremental to replace it with a full replay"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read the replay state {path}: {exc}") from exc
    try:
        state = ReplayState.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(f"the replay state {path} is damaged ({exc}); {again}") from exc
    if state.share != share:
        raise StateError(
            f"{out} holds the replay of the share {state.share}, not of {share}; "
            f"give another --out, or {again}"
        )
    missing = [n for n in state.loads if not load_dir(out, n).is_dir()]
    if missing:
        raise StateError(
            f"the replay state {path} lists records/load={missing[0]}, which is not there; {again}"
        )
    return state


def write_state(out: str | Path, state: ReplayState) -> None:
    """Replace the state file atomically: the new one whole, or the old one."""
    path = state_path(out)
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w") as handle:
        json.dump(state.to_json(), handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    _fsync_directory(path.parent)


def forget_state(out: str | Path) -> None:
    """Remove the state before a full replay rewrites the tables it describes."""
    path = state_path(out)
    if path.exists():
        path.unlink()
        _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_unlisted(out: str | Path, state: ReplayState | None) -> list[str]:
    """Delete what the records table holds besides the loads ``state`` lists: a crashed
    run's loads and Spark's temporary files. Returns the names removed."""
    directory = records_dir(out)
    if not directory.is_dir():
        return []
    listed = set(state.loads) if state is not None else set()
    removed = []
    for entry in sorted(directory.iterdir()):
        match = _LOAD_DIR.fullmatch(entry.name)
        if match and int(match[1]) in listed:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry.name)
    return removed


def remove_loads(out: str | Path, loads: Iterable[int]) -> None:
    for load in loads:
        shutil.rmtree(load_dir(out, load), ignore_errors=True)


@dataclass(frozen=True)
class NextRun:
    """What one run reads, given the state: each plan from the offset to start at."""

    reads: list[SegmentPlan]
    redo: frozenset[str]  # read again wholly: their rows in earlier loads are dropped
    final_load: int
    provisional_load: int

    @property
    def names(self) -> frozenset[str]:
        return frozenset(plan.name for plan in self.reads)


def next_run(state: ReplayState, plans: list[SegmentPlan]) -> NextRun:
    """Which segments to read and from where, so the table ends up as a full replay's.

    - A segment not read before: from its start.
    - A segment whose settled rows may no longer hold: wholly, dropping its
      rows. That is a fence whose verdict changed since the segment was read,
      where the smaller of the two limits is below the settled bytes (the old
      master's tail was read before the new master found it shorter), or a file
      now shorter than the settled bytes.
    - A segment with provisional rows, or grown since: from where its rows are
      settled (a batch boundary, or the start of its trailing damage).
    - Anything else is not read again.
    """
    reads, redo = [], set()
    for plan in plans:
        seen = state.segments.get(plan.name)
        if seen is None:
            reads.append(plan)
        elif plan.size_bytes < seen.settled_up_to or _fence_moved(seen, plan):
            reads.append(plan)
            redo.add(plan.name)
        elif seen.provisional or plan.size_bytes > seen.settled_up_to:
            reads.append(plan.from_offset(seen.settled_up_to))
    return NextRun(reads, frozenset(redo), state.next_load, state.next_load + 1)


def _fence_moved(seen: SegmentRead, plan: SegmentPlan) -> bool:
    """Would the fences now classify bytes already settled otherwise? A batch is valid when
    it ends within the limit, so only a limit below the settled bytes can, and only if it
    is not the one they were read with."""
    if plan.fence_limit == seen.fence_limit:
        return False
    limits = [limit for limit in (plan.fence_limit, seen.fence_limit) if limit is not None]
    return min(limits) < seen.settled_up_to


def after_run(
    state: ReplayState,
    run: NextRun,
    provisional_from: dict[str, int],
    dropped_loads: Iterable[int],
    written_loads: Iterable[int],
) -> ReplayState:
    """The state once ``run``'s loads are written: ``provisional_from`` is, per segment read,
    the offset of its first provisional row (none: all its rows are settled)."""
    segments = dict(state.segments)
    for plan in run.reads:
        opened = provisional_from.get(plan.name)
        segments[plan.name] = SegmentRead(
            epoch=plan.epoch,
            first_sequence=plan.first_sequence,
            size_read=plan.size_bytes,
            settled_up_to=plan.size_bytes if opened is None else opened,
            provisional=opened is not None,
            fence_limit=plan.fence_limit,
            is_epoch_tail=plan.is_epoch_tail,
        )
    dropped = set(dropped_loads)
    written = set(written_loads)
    loads = tuple(sorted((set(state.loads) - dropped) | written))
    return replace(
        state,
        loads=loads,
        open_load=run.provisional_load if run.provisional_load in written else None,
        next_load=run.provisional_load + 1,
        segments=segments,
    )
