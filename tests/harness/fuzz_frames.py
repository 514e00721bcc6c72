"""Random STOMP frames, valid and mangled, for the parser's fuzz runs (tests and bench).

Each case is a well-formed frame that is then, with some probability,
mangled (bytes flipped, cut, duplicated, special bytes inserted) and fed to a
parser in random chunks. The only exception the parser may raise is its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from primacy.broker.frames import Frame, FrameLimits, FrameParser, StompProtocolError, encode

COMMANDS = ["SEND", "SUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT", "MESSAGE", "CONNECT", "X"]
SPECIAL = [b"\x00", b"\n", b"\r", b":", b"\\", b"\xff", b"\xc3", b"content-length:", b"\n\n"]
ALPHABET = "abc:\\\r\n é"  # header text; NUL and controls come in through mangling (SPECIAL)
LIMITS = FrameLimits(max_frame_bytes=4096, max_header_bytes=512, max_headers=8)


@dataclass
class FuzzResult:
    cases: int = 0
    frames_parsed: int = 0
    protocol_errors: int = 0


def random_frame(rng: random.Random) -> bytes:
    # ``int(uniform() * n)`` rather than ``randrange``: a million frames make a few million
    # of these draws, and randrange's checks were most of the generator's time.
    uniform = rng.random
    command = rng.choice(COMMANDS)
    headers = []
    for _ in range(int(uniform() * 6)):
        key = "".join(rng.choices(ALPHABET, k=int(uniform() * 6)))
        value = "".join(rng.choices(ALPHABET, k=int(uniform() * 10)))
        if command == "CONNECT":
            key = key.replace(":", "")
            key, value = (text.replace("\r", "").replace("\n", "") for text in (key, value))
        headers.append((key.replace("content-length", ""), value))
    body = rng.randbytes(int(uniform() * 40))
    if b"\x00" in body or uniform() < 0.5:
        headers.append(("content-length", str(len(body))))
    return encode(Frame(command, tuple(headers), body))


def mangle(data: bytes, rng: random.Random) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        action = rng.randrange(5)
        at = rng.randrange(len(buffer) + 1)
        if action == 0 and buffer:
            buffer[min(at, len(buffer) - 1)] = rng.randrange(256)
        elif action == 1:
            buffer[at:at] = rng.choice(SPECIAL)
        elif action == 2:
            del buffer[at : at + rng.randrange(1, 8)]
        elif action == 3:
            buffer[at:at] = rng.randbytes(rng.randrange(1, 16))
        else:
            buffer = buffer[:at]
    return bytes(buffer)


def fuzz(cases: int, seed: int = 0) -> FuzzResult:
    """Run ``cases`` random frames through fresh parsers; raise on any foreign exception."""
    rng = random.Random(seed)
    result = FuzzResult()
    for _ in range(cases):
        data = random_frame(rng)
        if rng.random() < 0.7:
            data = mangle(data, rng)
        parser = FrameParser(LIMITS)
        result.cases += 1
        try:
            at = 0
            while at < len(data):
                step = 1 + int(rng.random() * 63)
                result.frames_parsed += len(parser.feed(data[at : at + step]))
                at += step
        except StompProtocolError:
            result.protocol_errors += 1
    return result
