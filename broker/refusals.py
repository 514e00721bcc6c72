"""The one exception a client's refused request becomes: an ERROR frame with its code."""

from __future__ import annotations


class Refused(Exception):
    """A client's request the broker will not carry out; becomes an ERROR frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
