"""The doctor's ownership check (issue 45, item 3): whom it checks for, and what it says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from primacy.nfs_profiles import codes
from primacy.nfs_profiles.doctor import diagnose
from primacy.nfs_profiles.findings import Severity
from primacy.nfs_profiles.ownership import service_identity
from primacy.share.layout import ShareLayout

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners of other users need root")


def _share_of_nobody(tmp_path: Path) -> ShareLayout:
    layout = ShareLayout(tmp_path / "share")
    for directory in (layout.root, layout.epochs, layout.journal):
        directory.mkdir(mode=0o750)
        os.chown(directory, NOBODY, NOBODY)
    return layout


def test_as_root_the_share_owner_is_the_service_user_and_root_owned_shares_are_not_checked(
    tmp_path: Path,
) -> None:
    layout = _share_of_nobody(tmp_path)
    identity, findings = service_identity(None, layout.root)
    assert identity is not None and identity.uid == NOBODY and findings == ()
    assert service_identity(None, tmp_path) == (None, ())  # root's: name the user


def test_an_unknown_user_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    identity, findings = service_identity("no-such-user-here", tmp_path)
    assert identity is None
    assert [finding.code for finding in findings] == [codes.SERVICE_USER_UNKNOWN]


def test_a_root_owned_epoch_is_refused_with_its_one_fix(tmp_path: Path) -> None:
    layout = _share_of_nobody(tmp_path)
    layout.epoch_file(4).write_bytes(b"{}")
    layout.epoch_file(4).chmod(0o640)
    for user in (None, "nobody"):
        diagnosis = diagnose(layout.root, owners=True, service_user=user)
        found = [f for f in diagnosis.findings if f.code == codes.SHARE_UNUSABLE_BY_SERVICE_USER]
        assert [f.subject for f in found] == [str(layout.epoch_file(4))]
        assert found[0].severity is Severity.REFUSED and diagnosis.exit_code == 2
        assert "nobody cannot read it" in found[0].message
        path = layout.epoch_file(4)
        assert found[0].fix.startswith("chown nobody:") and found[0].fix.endswith(
            f" {path} && chmod 0640 {path}"
        )
    without = diagnose(layout.root)  # primacy run's checks: owners are not its business
    assert codes.SHARE_UNUSABLE_BY_SERVICE_USER not in {f.code for f in without.findings}


def test_the_directory_advice_is_the_service_users_not_root_primacy_2770(tmp_path: Path) -> None:
    layout = _share_of_nobody(tmp_path)
    layout.journal.chmod(0o777)
    diagnosis = diagnose(layout.root, owners=True, service_user="nobody")
    (writable,) = [f for f in diagnosis.findings if f.code == codes.WRITABLE_BY_OTHERS]
    assert writable.fix.startswith("chown nobody:") and "chmod 0750" in writable.fix
    assert "2770" not in writable.fix
