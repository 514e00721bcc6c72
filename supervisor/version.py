"""The installed package's version, in a module of its own so that ``primacy --version``
imports nothing else (the node's status module pulls in pydantic and the store)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("primacy")
    except PackageNotFoundError:
        return "0+unknown"
