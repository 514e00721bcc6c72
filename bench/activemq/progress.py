"""The comparison's progress lines, and the id prefix each group's messages carry."""

from __future__ import annotations

import time

_started = time.monotonic()


def say(message: str) -> None:
    """Progress on stdout, with the seconds since start."""
    print(f"[{time.monotonic() - _started:6.1f} s] {message}", flush=True)


def slug(label: str) -> str:
    """A group's label as a part of message ids: ``ActiveMQ tuned`` -> ``activemq-tuned``."""
    return label.lower().replace(" ", "-")
