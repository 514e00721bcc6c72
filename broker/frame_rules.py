"""Reading a client frame's headers and writing ERROR frames: the connection's small rules."""

from __future__ import annotations

import re

from primacy.broker import codes
from primacy.broker.frames import VERSIONS, Frame
from primacy.broker.refusals import Refused

# The destinations there are (docs/stomp.md, "Destinations"): queues, topics, and temporary
# queues by the name their owner uses and by the full name others send to (temp_queues.py).
QUEUE_PREFIX = "/queue/"
TOPIC_PREFIX = "/topic/"
DESTINATION_PREFIXES = (QUEUE_PREFIX, TOPIC_PREFIX, "/temp-queue/", "/remote-temp-queue/")
# What a destination may not hold: C0 controls and DEL (one search, not a check per character).
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def negotiate_version(accept_version: str | None) -> str | None:
    """STOMP 1.2's rule: the highest version both sides speak; none given means 1.0."""
    offered = {v.strip() for v in (accept_version or "1.0").split(",")}
    return next((v for v in reversed(VERSIONS) if v in offered), None)


def error_frame(code: str, detail: str, receipt: str | None) -> Frame:
    headers = {"message": codes.title(code), "content-type": "text/plain"}
    if receipt is not None:
        headers["receipt-id"] = receipt
    if code == codes.UNSUPPORTED_VERSION:
        headers["version"] = ",".join(VERSIONS)  # what the server speaks
    body = f"{code}: {detail}\n".encode()
    headers["content-length"] = str(len(body))
    return Frame.make("ERROR", headers, body)


def required(frame: Frame, name: str) -> str:
    value = frame.get(name)
    if value is None:
        raise Refused(codes.BAD_REQUEST, f"{frame.command} needs a {name} header")
    return value


def positive_int(text: str | None, default: int) -> int:
    if text is None:
        return default
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise Refused(codes.BAD_REQUEST, f"{text[:32]!r} is not a positive integer")
    return int(text)


def heart_beat(text: str) -> tuple[int, int]:
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise Refused(codes.BAD_REQUEST, f"heart-beat {text[:32]!r} is not two numbers")
    return int(parts[0]), int(parts[1])


def negotiated(ours_ms: int, theirs_ms: int) -> int:
    """STOMP's rule: 0 if either side says 0, else the larger interval."""
    return 0 if ours_ms == 0 or theirs_ms == 0 else max(ours_ms, theirs_ms)


def check_destination(destination: str | None) -> str:
    """The destination if it names a queue or a topic; Refused otherwise."""
    if destination is None:
        raise Refused(codes.BAD_REQUEST, "the frame needs a destination header")
    if _CONTROL.search(destination):
        raise Refused(
            codes.UNSUPPORTED_DESTINATION,
            f"destination {destination[:100]!r} holds a control character",
        )
    for prefix in DESTINATION_PREFIXES:
        if destination.startswith(prefix) and len(destination) > len(prefix):
            return destination
    raise Refused(
        codes.UNSUPPORTED_DESTINATION,
        f"destination {destination[:100]!r} is not a queue or a topic; use /queue/NAME, "
        "/topic/NAME or /temp-queue/NAME",
    )
