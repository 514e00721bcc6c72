"""A journal opening refused for permissions though the modes allow it (an ACL, a server's
squashing): the node claims no further epoch until the path opens (issue 45, item 3).

The owner-and-mode case runs on real processes as another user
(tests/integration/test_share_ownership.py); this one needs a refusal the modes do not
show, which the test plays by refusing ``open`` of one path."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from primacy.share.layout import ShareLayout
from primacy.share.posix import PosixShare
from primacy.supervisor.config import NodeConfig
from primacy.supervisor.machine import roles
from primacy.supervisor.shell import share_jobs
from primacy.supervisor.shell.share_jobs import ShareJobs


def test_a_refused_journal_path_stops_the_claims_until_it_opens(
    share: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = ShareLayout(share).checkpoints
    refused.mkdir(parents=True, exist_ok=True)
    denied = PermissionError(errno.EACCES, "Permission denied", str(refused))

    def refuse_the_opening(*args: Any, **kwargs: Any) -> Any:
        raise denied

    monkeypatch.setattr(share_jobs.JournalStore, "open", refuse_the_opening)
    real_open = os.open

    def acl_refuses(path: Any, flags: int, *args: Any) -> int:
        if str(path) == str(refused):
            raise denied
        return real_open(path, flags, *args)

    monkeypatch.setattr(share_jobs.os, "open", acl_refuses)
    config = NodeConfig(node_id="a", share=share, http="127.0.0.1:1")
    jobs = ShareJobs(config, PosixShare(share), clock=lambda: 0.0)
    failed = jobs.open_journal(config, 1)
    assert isinstance(failed, roles.JournalFailed)

    attempt = jobs.try_lock()  # no lock taken: a claim would be refused
    assert not attempt.acquired and attempt.share_unusable is not None
    assert "PRIMACY-1030" in attempt.share_unusable and str(refused) in attempt.share_unusable
    assert attempt.error == attempt.share_unusable

    monkeypatch.setattr(share_jobs.os, "open", real_open)  # the ACL is fixed
    attempt = jobs.try_lock()
    assert attempt.acquired and attempt.share_unusable is None
    jobs.yield_lock()
