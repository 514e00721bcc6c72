"""The client tests use the broker tests' in-process masters."""

from __future__ import annotations

from tests.broker.conftest import masters

__all__ = ["masters"]
