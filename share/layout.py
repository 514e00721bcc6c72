"""Where everything lives on the share: every path primacy keeps there, declared once.

Nothing above this package spells a name on the share; it asks a ``ShareLayout``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOCK_FILE_NAME = "primacy.lock"
EPOCHS_DIR_NAME = "epochs"
NODES_DIR_NAME = "nodes"
JOURNAL_DIR_NAME = "journal"
CHECKPOINTS_DIR_NAME = "checkpoints"  # inside the journal directory
QUARANTINE_DIR_NAME = "quarantine"  # inside the journal directory: damaged batches set aside
PAUSED_FILE_NAME = "paused"
SWITCHOVER_FILE_NAME = "switchover.json"
GROUP_SETTINGS_FILE_NAME = "group.json"
NODE_ENTRY_SUFFIX = ".json"
# The modes primacy creates files and directories on the share with, whatever the umask: what
# the shipped unit's UMask=0027 gives. Nobody outside the owner and the group may open a file:
# an unprivileged user who can open the lock file can lock it (flock on a read-only
# descriptor) and keep the group without a master (issue 27), and the journal holds the
# messages. ``primacy doctor`` flags a lock file others may open (docs/safety.md).
FILE_MODE = 0o640
DIRECTORY_MODE = 0o750


@dataclass(frozen=True)
class ShareLayout:
    """The paths of one share, rooted at the operator's share directory."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def lock_file(self) -> Path:
        """The file whose exclusive lock makes a node master."""
        return self.root / LOCK_FILE_NAME

    @property
    def epochs(self) -> Path:
        """``epochs/N``: one file per claimed epoch (the fencing tokens)."""
        return self.root / EPOCHS_DIR_NAME

    @property
    def nodes(self) -> Path:
        """``nodes/<node-id>.json``: the group's registry."""
        return self.root / NODES_DIR_NAME

    @property
    def journal(self) -> Path:
        """The journal's segments."""
        return self.root / JOURNAL_DIR_NAME

    @property
    def checkpoints(self) -> Path:
        """The journal's checkpoints."""
        return self.journal / CHECKPOINTS_DIR_NAME

    @property
    def quarantine(self) -> Path:
        """Damaged batches recovery set aside, for the operator."""
        return self.journal / QUARANTINE_DIR_NAME

    @property
    def paused_marker(self) -> Path:
        """Present while the group is paused for maintenance."""
        return self.root / PAUSED_FILE_NAME

    @property
    def group_settings(self) -> Path:
        """What every node of the group must agree on (the lock method), recorded once."""
        return self.root / GROUP_SETTINGS_FILE_NAME

    @property
    def switchover_marker(self) -> Path:
        """A switchover's target, while one is under way."""
        return self.root / SWITCHOVER_FILE_NAME

    def epoch_file(self, epoch: int) -> Path:
        return self.epochs / str(epoch)

    def node_entry(self, node_id: str) -> Path:
        return self.nodes / f"{node_id}{NODE_ENTRY_SUFFIX}"

    @property
    def directories(self) -> tuple[Path, ...]:
        """Every directory primacy keeps on the share, the share itself first: a file planted
        in any of them is read by every node (``primacy doctor`` checks who may write them)."""
        return (self.root, self.epochs, self.nodes, self.journal, self.checkpoints)


def journal_dir(share: str | Path) -> Path:
    """The journal directory of ``share`` (for the tools that are given the share's path)."""
    return ShareLayout(Path(share)).journal
