"""Many messages journaled in one call (store/bulk.py): the same journal as one
``append_send`` each, one future for all, refused whole if one is too large."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from primacy.store.bulk import append_sends
from primacy.store.errors import JournalFenced, MessageTooLarge
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from primacy.store.state import MESSAGE_ID, SEQUENCE


def recovered(share: Path) -> list[tuple[str, int]]:
    state = recover(share / "journal", quarantine=False).state
    return [(m[MESSAGE_ID], m[SEQUENCE]) for m in state.pending["/queue/a"].values()]


def test_a_bulk_append_writes_what_one_append_each_would(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    store = open_store()
    first = store.append_send("/queue/a", "single", b"x").result()
    sends = [("/queue/a", f"m-{n}", b"p" * 1024, {"n": str(n)}) for n in range(100)]
    last = append_sends(store, sends).result(timeout=10)
    assert last == first + 100
    store.close()
    ids = [("single", first)] + [(f"m-{n}", first + 1 + n) for n in range(100)]
    assert recovered(tmp_path / "share") == ids
    again = open_store(epoch=2)  # a resend of any of them is a duplicate
    assert all(again.is_duplicate("/queue/a", f"m-{n}") for n in range(100))
    record = again.read_message(again.location_of("/queue/a", "m-7"))  # type: ignore[arg-type]
    assert record.headers == {"n": "7"} and record.payload == b"p" * 1024


def test_one_message_too_large_refuses_the_whole_call(
    open_store: Callable[..., JournalStore], tmp_path: Path
) -> None:
    store = open_store(max_message_size=2048)
    sends = [("/queue/a", "ok", b"x", None), ("/queue/a", "big", b"y" * 4096, None)]
    with pytest.raises(MessageTooLarge):
        append_sends(store, sends)
    store.append_send("/queue/a", "after", b"z").result()
    store.close()
    assert [m for m, _ in recovered(tmp_path / "share")] == ["after"]


def test_a_fenced_bulk_append_is_not_acknowledged(open_store: Callable[..., JournalStore]) -> None:
    fenced = [False]

    def check() -> None:
        if fenced[0]:
            raise RuntimeError("another node claimed a later epoch")

    store = open_store(check=check)
    fenced[0] = True
    done = append_sends(store, [("/queue/a", f"m-{n}", b"x", None) for n in range(10)])
    with pytest.raises(JournalFenced):
        done.result(timeout=10)
