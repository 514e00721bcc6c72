"""Fences: which bytes of earlier-epoch segments a later master accepted when it took over.

A FENCE record written by the master of epoch F lists, for every segment of an
earlier epoch, the length F found after claiming its epoch. For a segment of
epoch E, every fence of an epoch F > E applies: the segment is valid up to the
smallest length those fences list, and a fence that does not list it at all
(the segment was created after F claimed its epoch) fences it entirely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from store import format as fmt


@dataclass
class FenceTable:
    """Every fence known, by the epoch of the master that wrote it."""

    by_epoch: dict[int, dict[tuple[int, int], int]] = field(default_factory=dict)

    def add(self, fence_epoch: int, entries: list[fmt.FenceEntry]) -> None:
        self.by_epoch[fence_epoch] = {(e.epoch, e.first_sequence): e.length for e in entries}

    def limit_for(self, epoch: int, first_sequence: int) -> int | None:
        """Bytes of this segment later fences allow; None if no fence applies."""
        limits = [
            entries.get((epoch, first_sequence), 0)
            for fence_epoch, entries in self.by_epoch.items()
            if fence_epoch > epoch
        ]
        return min(limits) if limits else None

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {"epoch": fence_epoch, "entries": [[e, s, n] for (e, s), n in sorted(entries.items())]}
            for fence_epoch, entries in sorted(self.by_epoch.items())
        ]

    @classmethod
    def from_json(cls, data: list[dict[str, Any]]) -> FenceTable:
        table = cls()
        for fence in data:
            table.add(
                int(fence["epoch"]), [fmt.FenceEntry(*map(int, row)) for row in fence["entries"]]
            )
        return table
