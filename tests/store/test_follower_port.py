"""The follower reads the segments it follows only through the share port's followed files
(``share/followed_files.py``): here the in-memory backend, fed what a real ``JournalStore``
wrote, as a close-to-open client would see it. (The follower's first full recovery and its
directory listing read the real directory, which these tests keep in step.)"""

from __future__ import annotations

from pathlib import Path

from primacy.share.memory_files import MemoryFollowedFiles
from primacy.store.follower import JournalFollower
from primacy.store.journal import JournalStore
from primacy.store.segments import list_segments
from tests.store.test_follower import config, no_fencing_check, write


def mirror(share: Path, files: MemoryFollowedFiles, seen: dict[Path, int]) -> None:
    """Give the in-memory files what the journal's segments gained since the last call."""
    for ref in list_segments(share / "journal"):
        data = ref.path.read_bytes()
        files.append(ref.path, data[seen.get(ref.path, 0) :])
        seen[ref.path] = len(data)


def test_a_follower_on_the_in_memory_port_follows_appends_and_drops_a_replaced_segment(
    share: Path,
) -> None:
    master = JournalStore.open(config(share), epoch=1, fencing_check=no_fencing_check)
    files, seen = MemoryFollowedFiles(), dict[Path, int]()
    try:
        write(master, 0, 30)
        mirror(share, files, seen)
        follower = JournalFollower(share / "journal", 100_000, files=files)
        assert follower.poll().mode == "following"
        start = follower.status.last_sequence

        write(master, 30, 30)
        # Appended on the share, not yet visible through the port: nothing new is applied.
        assert follower.poll().last_sequence == start
        mirror(share, files, seen)
        after = follower.poll()
        assert after.mode == "following" and after.last_sequence > start
        assert after.lag_bytes == 0

        # Another file under the newest segment's name, with the same bytes: only the port's
        # identity tells it apart, and the follower must not take it for the one it followed.
        newest = list_segments(share / "journal")[-1].path
        files.replace(newest, newest.read_bytes())
        status = follower.poll()
        assert status.mode == "fallen_back"
        assert status.last_fallback is not None and "replaced" in status.last_fallback
    finally:
        master.close()
