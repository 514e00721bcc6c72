"""`primacy run` refuses a share `primacy doctor` refuses, unless told to go ahead anyway.

pyfakefs stands in for an NFSv3 mount (no NFS server can exist here): a fake
/proc/self/mountinfo says the share is NFSv3, and the command runs in-process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem_unittest import Patcher

from primacy import nfs_profiles
from primacy.cli.main import EXIT_SHARE_UNUSABLE, main

# The CLI imports these lazily; under the fake filesystem the installed package is invisible.
from primacy.spark import replay as _replay  # noqa: F401
from primacy.supervisor.shell import node as _node  # noqa: F401
from tests.nfs_profiles.mountinfo_samples import BASE, NFS3


def _run_on_nfs3(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    with Patcher() as patcher:
        patcher.fs.add_real_directory(str(Path(nfs_profiles.__file__).parent))
        patcher.fs.create_file("/proc/self/mountinfo", contents=BASE + NFS3)
        os.makedirs("/srv/primacy")
        code = main(["run", "--node-id", "a", "--share", "/srv/primacy", *extra])
    return code, capsys.readouterr().err


def test_run_refuses_an_nfsv3_share(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_on_nfs3(capsys)
    assert code == EXIT_SHARE_UNUSABLE
    assert "PRIMACY-3020" in err and "vers=3" in err and "--force-unsupported-share" in err


def test_force_gets_past_the_mount_check_but_not_past_the_lock_probe(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    code, err = _run_on_nfs3(capsys, "--force-unsupported-share")
    # The mount check is overridden (logged loudly); the fake filesystem's locks do not
    # exclude, which the lock probe still refuses.
    assert code == EXIT_SHARE_UNUSABLE
    assert "PRIMACY-3020" not in err
    assert "do not exclude" in err
    assert any("PRIMACY-3021" in record.getMessage() for record in caplog.records)
