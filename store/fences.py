"""Fences: which bytes of earlier-epoch segments a later master accepted when it took over.

A FENCE record written by the master of epoch F lists, for every segment of an
earlier epoch, the length F found after claiming its epoch. For a segment of
epoch E, every fence of an epoch F > E applies: the segment is valid up to the
smallest length those fences list, and a fence that does not list it at all
(the segment was created after F claimed its epoch) fences it entirely.

The table keeps exactly that verdict per segment, not every fence: each
takeover writes one more fence listing every segment there is, so keeping them
all (and checkpointing them all) would make a takeover's cost grow with the
square of the number of epochs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from primacy.store import payloads
from primacy.store.state import count

SegmentKey = tuple[int, int]  # (epoch, first sequence)


@dataclass
class FenceTable:
    """The verdict of every fence known: per segment, the bytes later fences allow."""

    fence_epochs: set[int] = field(default_factory=set)
    # For each segment some fence listed: the smallest length over the fences of later
    # epochs, a fence that does not list it counting as 0.
    limits: dict[SegmentKey, int] = field(default_factory=dict)

    def add(self, fence_epoch: int, entries: list[payloads.FenceEntry]) -> None:
        """Apply the fence of ``fence_epoch``'s master (in any order, any number of times)."""
        listed = {(e.epoch, e.first_sequence): e.length for e in entries if e.epoch < fence_epoch}
        newest = self._newest()
        for key in self.limits:
            if key[0] < fence_epoch and key not in listed:
                self.limits[key] = 0  # created after this fence was taken
        for key, length in listed.items():
            if key in self.limits:
                self.limits[key] = min(self.limits[key], length)
            else:
                # Listed by no fence so far: every known fence of a later epoch than the
                # segment's left it out, so it was created after them.
                self.limits[key] = 0 if newest > key[0] else length
        self.fence_epochs.add(fence_epoch)

    def limit_for(self, epoch: int, first_sequence: int) -> int | None:
        """Bytes of this segment later fences allow; None if no fence applies."""
        return self._verdict((epoch, first_sequence), self._newest())

    def _verdict(self, key: SegmentKey, newest: int) -> int | None:
        return None if newest <= key[0] else self.limits.get(key, 0)

    def _newest(self) -> int:
        return max(self.fence_epochs, default=0)

    def merge(self, other: FenceTable) -> None:
        """Apply every fence ``other`` knows: the verdict is as if both had seen all fences."""
        newest, other_newest = self._newest(), other._newest()
        merged = {}
        for key in set(self.limits) | set(other.limits):
            verdicts = (self._verdict(key, newest), other._verdict(key, other_newest))
            merged[key] = min(v for v in verdicts if v is not None)
        self.limits = merged
        self.fence_epochs |= other.fence_epochs

    def to_json(self) -> dict[str, Any]:
        return {
            "fence_epochs": sorted(self.fence_epochs),
            "limits": [[e, s, n] for (e, s), n in sorted(self.limits.items())],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | list[dict[str, Any]]) -> FenceTable:
        """The table ``to_json`` wrote (or version 2's fences); ValueError, KeyError or
        TypeError for anything else, a number out of range included."""
        table = cls()
        if isinstance(data, list):  # checkpoint version 2: every fence in full
            for fence in data:
                entries = [payloads.FenceEntry(*map(count, row)) for row in fence["entries"]]
                table.add(count(fence["epoch"]), entries)
            return table
        table.fence_epochs = {count(epoch) for epoch in data["fence_epochs"]}
        table.limits = {(count(e), count(s)): count(n) for e, s, n in data["limits"]}
        return table
