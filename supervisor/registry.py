"""The group's node registry in the share: each node's id, host, addresses and priority.

Each node rewrites ``nodes/<node-id>.json`` atomically (temp file + rename)
every ``registry_refresh_ms``. Other nodes read it to break ties by priority
and to list the group. Nothing here is needed for safety: a stale or missing
entry only changes who waits a little before trying the lock.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from primacy.locker.share_io import names_in, real_directory
from primacy.supervisor.share_files import MAX_CLOCK_SKEW_S, read_json, write_json_atomically

NODES_DIR_NAME = "nodes"
# An entry not refreshed for this long is treated as a node that is gone.
LIVE_WINDOW_S = 10.0


@dataclass(frozen=True)
class NodeEntry:
    node_id: str
    host: str
    pid: int
    http: str
    priority: str
    role: str
    epoch: int | None
    updated_unix_s: float

    def is_live(self, now_unix_s: float) -> bool:
        """Refreshed lately; a timestamp from the future (planted, or a clock far ahead) is not
        a way to stay live forever."""
        age = now_unix_s - self.updated_unix_s
        return -MAX_CLOCK_SKEW_S <= age < LIVE_WINDOW_S


class NodeRegistry:
    """Read and write the ``nodes/`` directory of one share."""

    def __init__(self, share: Path) -> None:
        self.directory = Path(share) / NODES_DIR_NAME

    def publish(self, entry: NodeEntry) -> None:
        real_directory(self.directory)
        # Rewritten every refresh: losing one to a crash is harmless, so no fsync.
        write_json_atomically(
            self.directory / f"{entry.node_id}.json", asdict(entry), durable=False
        )

    def entries(self) -> list[NodeEntry]:
        names = sorted(names_in(self.directory))  # never through a symlink in its place
        found = []
        for name in names:
            if name.startswith(".") or not name.endswith(".json"):
                continue
            entry = _parse(self.directory / name)
            if entry is not None:
                found.append(entry)
        return found


def _parse(path: Path) -> NodeEntry | None:
    try:
        raw = read_json(path)
        return NodeEntry(
            node_id=str(raw["node_id"]),
            host=str(raw["host"]),
            pid=int(raw["pid"]),
            http=str(raw["http"]),
            priority=str(raw["priority"]),
            role=str(raw["role"]),
            epoch=None if raw.get("epoch") is None else int(raw["epoch"]),
            updated_unix_s=float(raw["updated_unix_s"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
