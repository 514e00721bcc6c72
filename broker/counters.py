"""The broker's running totals, which ``/metrics`` and ``/status`` report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Counters:
    """Running totals for ``BrokerService.stats``."""

    messages_in: int = 0  # SENDs journaled and queued
    duplicates_dropped: int = 0  # resends acknowledged without storing again
    messages_out: int = 0  # MESSAGE frames written, redeliveries included
    redeliveries: int = 0
    messages_acked: int = 0  # ACKs journaled
    connections_total: int = 0
    errors_sent: int = 0
    # Each limit's refusals (docs/stomp.md, "Limits"), and messages moved to a DLQ.
    connections_refused: int = 0
    subscriptions_refused: int = 0
    transactions_refused: int = 0
    dead_lettered: int = 0
    messages_expired: int = 0  # passed their ``expires`` before delivery (expiry.py)
    # Producer flow control: SENDs that waited for room, and those refused for want of it.
    sends_held: int = 0
    sends_refused_full: int = 0
    # Authentication and authorization (authentication.py, users.py).
    logins_ok: int = 0
    logins_failed: int = 0
    unauthorized: int = 0
    tls_handshakes_failed: int = 0
