"""Shared test harness: real supervisor processes, pollers, waits."""
