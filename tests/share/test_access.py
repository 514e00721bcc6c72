"""share/access.py: the paths an identity cannot use, from lstat, with the one fix (issue 45, 3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from primacy.share.access import Identity, share_fix, unusable_paths
from primacy.share.layout import ShareLayout

SERVICE = Identity(uid=4242, gids=frozenset({4243}), user="svc", group="svcgroup")


def _share(tmp_path: Path) -> ShareLayout:
    layout = ShareLayout(tmp_path / "share")
    for directory in layout.directories:
        directory.mkdir(mode=0o750)
    layout.lock_file.write_bytes(b"")
    layout.epoch_file(1).write_bytes(b"{}")
    (layout.journal / "0000000001-a.seg").write_bytes(b"x")
    for path in (*layout.directories, layout.lock_file, layout.epoch_file(1)):
        os.lchown(path, SERVICE.uid, 4243)
    os.lchown(layout.journal / "0000000001-a.seg", SERVICE.uid, 4243)
    return layout


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@needs_root
def test_a_share_the_service_user_owns_is_usable(tmp_path: Path) -> None:
    assert unusable_paths(_share(tmp_path), SERVICE) == ()


@needs_root
def test_files_another_user_left_are_named_with_the_one_fix(tmp_path: Path) -> None:
    layout = _share(tmp_path)
    segment = layout.journal / "0000000004-b.seg"
    segment.write_bytes(b"x")
    segment.chmod(0o640)  # root:root 0640: what a node run as root leaves
    layout.epoch_file(4).write_bytes(b"{}")
    layout.epoch_file(4).chmod(0o640)
    (layout.epochs / ".5.12.tmp").write_bytes(b"")  # a temporary: no node reads it
    found = unusable_paths(layout, SERVICE)
    assert [item.path for item in found] == [layout.epoch_file(4), segment]
    assert found[0].needs == "r"
    assert "cannot read" in found[0].problem()
    assert found[0].fix(
        SERVICE
    ) == f"chown svc:svcgroup {layout.epoch_file(4)} && chmod 0640 " + str(layout.epoch_file(4))
    assert share_fix(layout.root, SERVICE) == (
        f"chown -R svc:svcgroup {layout.root} && chmod -R u=rwX,g=rX,o= {layout.root}"
    )


@needs_root
def test_the_group_class_decides_for_a_member_and_the_lock_file_needs_write(
    tmp_path: Path,
) -> None:
    layout = _share(tmp_path)
    os.lchown(layout.journal, 0, 4243)
    layout.journal.chmod(0o2770)  # root:group, group-writable: usable
    os.lchown(layout.lock_file, 0, 4243)
    layout.lock_file.chmod(0o640)  # group may only read: a node cannot lock-write it
    found = unusable_paths(layout, SERVICE)
    assert [(item.path, item.needs) for item in found] == [(layout.lock_file, "rw")]


@needs_root
def test_journal_only_leaves_the_coordinators_records_alone(tmp_path: Path) -> None:
    layout = _share(tmp_path)
    os.lchown(layout.epochs, 0, 0)
    os.lchown(layout.root, 0, 0)
    layout.root.chmod(0o755)  # others may pass through: the journal is reachable
    assert unusable_paths(layout, SERVICE, journal_only=True) == ()
    assert {item.path for item in unusable_paths(layout, SERVICE)} == {layout.root, layout.epochs}


def test_root_can_use_everything_and_missing_paths_are_no_finding(tmp_path: Path) -> None:
    root = Identity(uid=0, gids=frozenset({0}), user="root", group="root")
    layout = ShareLayout(tmp_path / "nothing-yet")
    assert unusable_paths(layout, root) == ()
    assert unusable_paths(layout, SERVICE) == ()


def test_the_current_identity_is_this_process() -> None:
    me = Identity.current()
    assert me.uid == os.geteuid() and os.getegid() in me.gids
    assert Identity.named(str(me.uid)).uid == me.uid
