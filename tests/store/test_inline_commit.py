"""A lone record committed on the submitting thread (writer.py, ``commit_inline``): its
waiter completes only after its fdatasync and its fencing check, as on the writer thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

import pytest

from primacy.store import format as fmt
from primacy.store.errors import JournalFenced
from primacy.store.journal import JournalStore
from primacy.store.writer import GroupCommitWriter, SegmentFile
from tests.harness.group import wait_until

# Inline commits as the default has them (store/config.py), set here so the tests say so.
INLINE_ON = 0.5

Events = list[tuple[str, str, bool]]  # (what, thread name, the record's future done then)


def record(n: int) -> fmt.EncodedRecord:
    return fmt.EncodedRecord(
        fmt.RecordType.SEND, 0, b"/queue/a", f"m-{n}".encode(), payload=b"x" * 1024
    )


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> tuple[Events, list[Future[int]]]:
    """Each real fdatasync of a segment noted, with the thread and whether the watched
    future was done then (the fencing check notes itself, see ``check``)."""
    noted: Events = []
    watched: list[Future[int]] = []
    real_sync = SegmentFile.sync

    def sync(self: SegmentFile) -> None:
        real_sync(self)
        done = bool(watched) and watched[-1].done()
        noted.append(("sync", threading.current_thread().name, done))

    monkeypatch.setattr(SegmentFile, "sync", sync)
    return noted, watched


def check(events: Events, watched: list[Future[int]], fail: list[bool]) -> Callable[[], None]:
    def fencing_check() -> None:
        done = bool(watched) and watched[-1].done()
        events.append(("fence", threading.current_thread().name, done))
        if fail and fail[0]:
            raise RuntimeError("another node claimed a later epoch")

    return fencing_check


def idle_writer(store: JournalStore) -> GroupCommitWriter:
    """The store's writer once idle: the open's fence was committed by the writer thread,
    which may not have left that step yet, and a lone record is handed off meanwhile."""
    writer = store._writer
    assert writer is not None
    wait_until(lambda: not writer.busy, 10, "the writer to be idle")
    return writer


def test_a_lone_record_completes_on_the_callers_thread_only_after_its_sync_and_fence(
    open_store: Callable[..., JournalStore], events: tuple[Events, list[Future[int]]]
) -> None:
    noted, watched = events
    store = open_store(check=check(noted, watched, []), inline_commit_quiet_s=INLINE_ON)
    writer = idle_writer(store)
    noted.clear()  # the fence record of the open
    for n in range(3):
        watched.append(store.submit_send(record(n), "/queue/a", f"m-{n}", defer=True))
        assert not watched[-1].done()  # deferred: nothing commits it before it is asked to
        assert store.commit_deferred() is True
        assert watched[-1].done() and watched[-1].result() > 0
    me = threading.current_thread().name
    assert noted == [("sync", me, False), ("fence", me, False)] * 3
    assert writer.inline_commits == 3
    assert all(store.location_of("/queue/a", f"m-{n}") is not None for n in range(3))


def test_a_failed_fencing_check_inline_fails_the_record_and_every_later_write(
    open_store: Callable[..., JournalStore], events: tuple[Events, list[Future[int]]]
) -> None:
    noted, watched = events
    fail = [False]
    store = open_store(check=check(noted, watched, fail), inline_commit_quiet_s=INLINE_ON)
    idle_writer(store)
    fail[0] = True
    watched.append(store.submit_send(record(1), "/queue/a", "m-1", defer=True))
    assert store.commit_deferred() is True
    with pytest.raises(JournalFenced):
        watched[-1].result(timeout=5)
    assert noted[-2:] == [("sync", "MainThread", False), ("fence", "MainThread", False)]
    with pytest.raises(JournalFenced):
        store.submit_send(record(2), "/queue/a", "m-2")


def test_a_group_goes_to_the_writer_thread_and_keeps_it_while_concurrency_lasts(
    open_store: Callable[..., JournalStore], events: tuple[Events, list[Future[int]]]
) -> None:
    noted, watched = events
    # A long quiet time: once a group was committed, no record is committed inline again.
    store = open_store(check=check(noted, watched, []), inline_commit_quiet_s=3600.0)
    noted.clear()
    two = [store.submit_send(record(n), "/queue/a", f"m-{n}", defer=True) for n in (1, 2)]
    assert store.commit_deferred() is False  # two records: a group, on the writer thread
    assert [f.result(timeout=5) for f in two] == [2, 3]
    watched.append(store.submit_send(record(3), "/queue/a", "m-3", defer=True))
    assert store.commit_deferred() is False  # a group was committed within the quiet time
    assert watched[-1].result(timeout=5) == 4
    assert {thread for _, thread, _ in noted} == {"primacy-journal-writer"}
    assert store._writer is not None and store._writer.inline_commits == 0


def test_inline_commits_can_be_turned_off(
    open_store: Callable[..., JournalStore], events: tuple[Events, list[Future[int]]]
) -> None:
    noted, watched = events
    store = open_store(check=check(noted, watched, []), inline_commit_quiet_s=None)
    watched.append(store.submit_send(record(1), "/queue/a", "m-1", defer=True))
    assert store.commit_deferred() is False
    assert watched[-1].result(timeout=5) == 2
    assert noted[-1][1] == "primacy-journal-writer"


def test_no_inline_commit_while_a_job_of_the_writer_reads_the_state(
    open_store: Callable[..., JournalStore], events: tuple[Events, list[Future[int]]]
) -> None:
    # A checkpoint is a job of the writer thread that reads the state as it writes: an
    # inline commit applying records meanwhile would change it under the checkpoint.
    noted, watched = events
    store = open_store(check=check(noted, watched, []), inline_commit_quiet_s=INLINE_ON)
    writer = store._writer
    assert writer is not None
    running, release = threading.Event(), threading.Event()
    job = writer.call(lambda: (running.set(), release.wait(10)))
    assert running.wait(10)
    watched.append(store.submit_send(record(1), "/queue/a", "m-1", defer=True))
    assert store.commit_deferred() is False  # the writer is busy: it commits it after the job
    assert not watched[-1].done()
    release.set()
    job.result(timeout=10)
    assert watched[-1].result(timeout=10) == 2
    assert writer.inline_commits == 0


def test_ending_inline_commits_holds_one_under_way_until_the_caller_is_done(
    open_store: Callable[..., JournalStore],
) -> None:
    # What a broker's stop relies on while its loop hangs in a commit on a hung share (a
    # fencing check the test holds stands in for it): the committing thread cannot leave
    # the commit while ``while_one_runs`` runs, and no commit runs inline afterwards.
    entered, release = threading.Event(), threading.Event()

    def held_check() -> None:
        if threading.current_thread().name == "committer":
            entered.set()
            release.wait(10)

    store = open_store(check=held_check, inline_commit_quiet_s=INLINE_ON)
    first = store.submit_send(record(1), "/queue/a", "m-1", defer=True)
    inline: list[bool] = []
    committer = threading.Thread(
        target=lambda: inline.append(store.commit_deferred()), name="committer"
    )
    committer.start()
    assert entered.wait(10)
    seen: list[tuple[int, bool]] = []

    def while_one_runs() -> None:
        release.set()  # the commit completes its record, then waits to leave
        sequence = first.result(timeout=10)
        committer.join(0.1)
        seen.append((sequence, committer.is_alive()))

    assert store.end_inline_commits(while_one_runs) is True
    assert seen == [(2, True)]
    committer.join(10)
    assert inline == [True]
    second = store.submit_send(record(2), "/queue/a", "m-2", defer=True)
    assert store.commit_deferred() is False  # to the writer thread from now on
    assert second.result(timeout=10) == 3
    assert store.end_inline_commits(while_one_runs) is False
    assert len(seen) == 1
