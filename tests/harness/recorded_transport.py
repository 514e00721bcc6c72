"""A transport for driving a ``StompConnection`` without a socket: it keeps what is written.

tests/compiled/session.py feeds a scripted conversation through it; bench/hot_path.py
watches it for RECEIPTs.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Recorded(asyncio.Transport):
    """A transport that keeps every byte written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 61613) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data

    def is_closing(self) -> bool:
        return self.closed

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True
