"""Group-wide admin state kept in the share: the pause marker and a switchover's target.

Both are plain files every node reads, written atomically (temp file, fsync,
rename, fsync of the directory). Neither is needed for safety: the lock and
the epoch decide who may write; these only decide who *tries*.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from primacy.locker.share_io import remove
from primacy.supervisor.share_files import MAX_CLOCK_SKEW_S, read_json, write_json_atomically

PAUSED_FILE_NAME = "paused"
SWITCHOVER_FILE_NAME = "switchover.json"
# A switchover whose target has not taken over by then no longer holds other nodes back.
SWITCHOVER_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Switchover:
    """The master of ``epoch`` hands over to ``to_node``; others keep off until ``until_unix_s``."""

    from_node: str
    to_node: str
    epoch: int
    until_unix_s: float

    def holds_back(self, node_id: str, latest_epoch: int, now_unix_s: float) -> bool:
        """Whether ``node_id`` must leave a free lock to the switchover's target."""
        return (
            self.epoch == latest_epoch
            and now_unix_s < self.until_unix_s
            and node_id != self.to_node
        )


def pause(share: Path, by_node: str) -> None:
    write_json_atomically(
        Path(share) / PAUSED_FILE_NAME,
        {"by": by_node, "at_unix_s": time.time()},
        durable=True,
        share_root=True,
    )


def resume(share: Path) -> None:
    remove(Path(share) / PAUSED_FILE_NAME, share_root=True)


def is_paused(share: Path) -> bool:
    return (Path(share) / PAUSED_FILE_NAME).exists()


def request_switchover(share: Path, switchover: Switchover) -> None:
    write_json_atomically(
        Path(share) / SWITCHOVER_FILE_NAME, asdict(switchover), durable=True, share_root=True
    )


def read_switchover(share: Path) -> Switchover | None:
    try:
        raw = read_json(Path(share) / SWITCHOVER_FILE_NAME, share_root=True)
        switchover = Switchover(
            str(raw["from_node"]),
            str(raw["to_node"]),
            int(raw["epoch"]),
            float(raw["until_unix_s"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a damaged marker holds nobody back
    # A marker holds others back for SWITCHOVER_TIMEOUT_S at most; one that claims longer
    # (planted, or from a host whose clock runs far ahead) holds nobody back.
    if switchover.until_unix_s > time.time() + SWITCHOVER_TIMEOUT_S + MAX_CLOCK_SKEW_S:
        return None
    return switchover


def clear_switchover(share: Path) -> None:
    remove(Path(share) / SWITCHOVER_FILE_NAME, share_root=True)
