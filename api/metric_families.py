"""The kinds of metric family ``api/metrics.py`` declares, and the readings of ``/status``
fields its ``FromSnapshot`` families show (checked against the snapshot's types at import)."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from primacy.api.snapshot import StatusSnapshot


@dataclass(frozen=True)
class Reading:
    """One sample's value: the ``/status`` field it shows, and how to read it from a snapshot."""

    status_field: str
    read: Callable[[StatusSnapshot], float]


def figure(path: str) -> Reading:
    """The number at ``path`` in the snapshot (``"broker.messages_in"``), 0 while a record on
    the way is absent (no journal open, no broker serving). Raises here, at import, when
    ``path`` names no field or a field that is not a number."""
    names = path.split(".")
    kind: Any = StatusSnapshot
    for name in names:
        hints = _fields_of(kind)
        if name not in hints:
            raise AttributeError(f"metric reading {path!r}: {kind!r} has no field {name!r}")
        kind = _without_none(hints[name])
    if kind not in (int, float, bool):
        raise TypeError(f"metric reading {path!r}: the field is {kind!r}, not a number")

    def read(snapshot: StatusSnapshot) -> float:
        value: Any = snapshot
        for name in names:
            value = getattr(value, name)
            if value is None:
                return 0.0
        return float(value)

    return Reading(path, read)


@functools.cache
def _fields_of(kind: Any) -> dict[str, Any]:
    """A record's fields and their types; none for anything else (a number, a tuple)."""
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return typing.get_type_hints(kind)
    return {}


def _without_none(hint: Any) -> Any:
    """``X | None`` -> ``X``; any other type as it is."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


@dataclass(frozen=True)
class Observed:
    """A family the supervisor feeds as things happen (``NodeMetrics``'s attributes)."""

    name: str
    kind: Literal["counter", "histogram"]
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


@dataclass(frozen=True)
class FromSnapshot:
    """A family read from the latest snapshot at scrape time: a reading per label values
    (the empty tuple for a family without labels)."""

    name: str
    kind: Literal["counter", "gauge"]
    help: str
    samples: Mapping[tuple[str, ...], Reading]
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(len(values) != len(self.labels) for values in self.samples):
            raise ValueError(f"{self.name}: every sample needs one value per label {self.labels}")


@dataclass(frozen=True)
class FromCertificates:
    """A family read at scrape time from the node's TLS certificate files, through the callable
    ``NodeMetrics`` is handed (the supervisor's: api/ decodes no certificate): a sample per
    listener that serves TLS, none for a listener without."""

    name: str
    kind: Literal["gauge"]
    help: str
    labels: tuple[str, ...] = ("listener",)


Family = Observed | FromSnapshot | FromCertificates
