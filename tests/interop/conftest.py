"""The in-process masters of the broker tests."""

from tests.broker.conftest import masters

__all__ = ["masters"]
