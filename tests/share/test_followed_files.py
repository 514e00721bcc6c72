"""The followed-files port (``share/followed_files.py``): the same contract on real files and
in memory. A follower relies on it: what it reads is what one fresh open saw, with the file's
identity, so an append is seen at the next open and a replaced file is never taken for the
one it followed."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from primacy.share.followed_files import FollowedFiles, PosixFollowedFiles
from primacy.share.memory_files import MemoryFollowedFiles


@dataclass
class Backend:
    """A port, and a writer's hands on the same files (another node's, as far as the port
    can tell)."""

    files: FollowedFiles
    append: Callable[[Path, bytes], None]
    replace: Callable[[Path, bytes], None]
    truncate: Callable[[Path, int], None]
    remove: Callable[[Path], None]


def _posix(tmp_path: Path) -> Backend:
    def append(path: Path, data: bytes) -> None:
        with open(path, "ab") as handle:
            handle.write(data)

    def replace(path: Path, data: bytes) -> None:
        fresh = path.with_name(path.name + ".new")
        fresh.write_bytes(data)
        os.replace(fresh, path)

    def truncate(path: Path, size: int) -> None:
        os.truncate(path, size)

    return Backend(PosixFollowedFiles(), append, replace, truncate, os.unlink)


def _memory(tmp_path: Path) -> Backend:
    files = MemoryFollowedFiles()
    return Backend(files, files.append, files.replace, files.truncate, files.remove)


@pytest.fixture(params=["posix", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield _posix(tmp_path) if request.param == "posix" else _memory(tmp_path)


def test_an_open_reads_from_an_offset_up_to_its_size(backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "segment"
    backend.append(path, b"header|batch-1|")
    file = backend.files.open_revalidated(path)
    try:
        assert file.size == 15
        assert bytes(file.read(7, 100)) == b"batch-1|"
        assert bytes(file.read(0, 6)) == b"header"
        assert bytes(file.read(15, 10)) == b""
    finally:
        file.close()


def test_an_append_is_seen_by_the_next_open_only(backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "segment"
    backend.append(path, b"header|")
    before = backend.files.open_revalidated(path)
    backend.append(path, b"batch-2|")
    after = backend.files.open_revalidated(path)
    try:
        # what an open gave stays what it gave: reads never go past its size
        assert before.size == 7
        assert bytes(before.read(0, 100)) == b"header|"
        assert after.size == 15
        assert bytes(after.read(7, 100)) == b"batch-2|"
        assert after.identity == before.identity  # appended to: the same file
        stat = backend.files.stat(path)
        assert stat is not None and stat.size == 15 and stat.identity == before.identity
    finally:
        before.close()
        after.close()


def test_a_file_replaced_under_its_name_has_another_identity(
    backend: Backend, tmp_path: Path
) -> None:
    path = tmp_path / "segment"
    backend.append(path, b"header|batch-1|")
    first = backend.files.open_revalidated(path)
    first.close()
    backend.replace(path, b"header|batch-1|")  # same bytes, another file
    second = backend.files.open_revalidated(path)
    second.close()
    assert second.identity != first.identity
    stat = backend.files.stat(path)
    assert stat is not None and stat.identity == second.identity


def test_a_truncated_file_keeps_its_identity_and_shows_its_new_size(
    backend: Backend, tmp_path: Path
) -> None:
    path = tmp_path / "segment"
    backend.append(path, b"header|batch-1|")
    before = backend.files.stat(path)
    backend.truncate(path, 7)
    file = backend.files.open_revalidated(path)
    file.close()
    assert before is not None and file.identity == before.identity and file.size == 7


def test_a_missing_name(backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "segment"
    with pytest.raises(FileNotFoundError):
        backend.files.open_revalidated(path)
    assert backend.files.stat(path) is None
    backend.append(path, b"x")
    backend.remove(path)
    assert backend.files.stat(path) is None
    with pytest.raises(FileNotFoundError):
        backend.files.open_revalidated(path)
