"""Two ways of running measured in turns, and their medians side by side.

Each round measures both ways, the order reversed every other round, so that drift in a
shared machine's load hits both; the table gives each figure's median per way and the
ratio first / second (below 1: the first needs less, or makes fewer).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

Samples = dict[str, dict[str, list[float]]]  # way -> figure -> one value per round


def alternate(
    ways: Sequence[str], rounds: int, measure: Callable[[str], dict[str, float]]
) -> Samples:
    """``measure(way)`` once per way per round; prints every figure as it comes."""
    samples: Samples = {way: {} for way in ways}
    for round_number in range(rounds):
        order = list(ways) if round_number % 2 == 0 else list(reversed(ways))
        for way in order:
            for name, value in measure(way).items():
                samples[way].setdefault(name, []).append(value)
                print(f"round {round_number + 1}, {way}: {name} {value:,.2f}", flush=True)
    return samples


def print_medians(samples: Samples) -> None:
    """A markdown table: each figure's median for the two ways, and their ratio."""
    first, second = samples
    rounds = len(next(iter(samples[first].values()), []))
    print(f"\n| figure (median of {rounds}) | {first} | {second} | ratio |")
    print("| --- | --- | --- | --- |")
    for name in samples[first]:
        a, b = (statistics.median(samples[way][name]) for way in (first, second))
        print(f"| {name} | {a:,.2f} | {b:,.2f} | {a / b:.2f} |")
