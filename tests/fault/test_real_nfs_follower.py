"""Issue 44 on a real NFSv4 server: a follower on another NFS client than the writer keeps up.

The writer (a journal store) appends through host a's mount, the follower reads through host
b's: two NFS clients of one nfs-ganesha server (tests/harness/ganesha), so b sees a's appends
only as NFS lets it: at a fresh open (close-to-open), which is what the follower does each poll.
"""

from __future__ import annotations

import pytest

from primacy.store.config import StoreConfig
from primacy.store.follower import JournalFollower
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover
from tests.harness.ganesha.host import RealNfsHosts

pytestmark = [pytest.mark.nfs, pytest.mark.fuse, pytest.mark.slow]


def _no_fencing_check() -> None:
    """One writer only."""


def test_a_follower_on_another_nfs_client_keeps_up_with_the_writer(
    real_nfs: RealNfsHosts,
) -> None:
    a, b = real_nfs(2)
    config = StoreConfig(
        share=a.share, node_id="a", segment_max_bytes=64 * 1024, checkpoint_idle_s=0
    )
    writer = JournalStore.open(config, epoch=1, fencing_check=_no_fencing_check)
    follower = JournalFollower(b.share / "journal", config.dedupe_window_messages)
    try:
        assert follower.poll().mode == "following"
        for round_ in range(4):  # across rotations: new segments appear on b's listing
            sends = [writer.append_send("q", f"m{round_}-{n}", b"x" * 500) for n in range(100)]
            for future in sends:
                future.result(timeout=30)
            writer.append_ack("q", f"m{round_}-0").result(timeout=30)
            status = follower.poll()
            assert status.mode == "following" and status.lag_bytes == 0, status
            assert status.last_sequence == writer.stats().last_sequence
    finally:
        writer.close()
    follower.poll()
    truth = recover(a.share / "journal", use_checkpoint=False, log=False).state.summary()
    handed = follower.hand_over()
    assert not isinstance(handed, str), handed
    assert handed.checkpoint.state.summary() == truth
