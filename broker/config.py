"""The connector's settings: limits, heart-beats, flow control; validated once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from primacy.broker.frames import FrameLimits


@dataclass(frozen=True)
class BrokerConfig:
    """Everything the STOMP connector needs besides the journal and the address."""

    frame_limits: FrameLimits = field(default_factory=FrameLimits)
    # What the server offers in CONNECTED's heart-beat: it can send every
    # heart_beat_send_ms and wants to hear from the client every heart_beat_receive_ms.
    heart_beat_send_ms: int = 10_000
    heart_beat_receive_ms: int = 10_000
    # A client silent for this many negotiated intervals is cut off (slow or dead).
    heart_beat_grace_factor: float = 2.0
    # A connection that has not sent CONNECT within this time is closed.
    connect_timeout_s: float = 10.0
    # Deliveries outstanding (not acknowledged) per subscription, unless the
    # client asks for less with an ``activemq.prefetchSize`` header.
    prefetch: int = 1_000
    # A connection with this many journal writes in flight is not read from until
    # some complete: a producer that never waits cannot fill memory.
    max_writes_in_flight_per_connection: int = 10_000
    # Bytes queued on a socket before the broker stops sending it messages.
    write_buffer_high_bytes: int = 4 * 1024 * 1024
    server_name: str = "primacy"
    # Limits against one client exhausting the master (docs/operator-guide.md, "Limits").
    max_connections: int = 1_000
    max_subscriptions_per_connection: int = 1_000
    max_transactions_per_connection: int = 100
    # Bytes of SENDs (body and headers) a connection's open transactions may hold in memory.
    max_transaction_bytes: int = 16 * 1024 * 1024
    # A message delivered and not acknowledged this many more times goes to /queue/DLQ.<name>.
    max_redeliveries: int = 6
    # Bodies of stored, unacknowledged messages kept in memory; past this, a new message's
    # body stays in the journal only and is read back when its turn comes (a store cursor).
    max_body_memory_bytes: int = 128 * 1024 * 1024
    # Producer flow control (flow_control.py): a SEND waits while its destination holds this
    # many unacknowledged messages, or the broker this many in all; after the timeout, ERROR.
    max_destination_messages: int = 200_000
    max_pending_messages: int = 1_000_000
    flow_control_timeout_s: float = 30.0
    # Who may connect (users.py); None: every client, unauthenticated.
    stomp_users: Path | None = None
    # TLS for the listener (tls.py): PEM certificate chain and key; with a CA, mutual TLS.
    stomp_tls_cert: Path | None = None
    stomp_tls_key: Path | None = None
    stomp_tls_ca: Path | None = None

    def __post_init__(self) -> None:
        if self.heart_beat_send_ms < 0 or self.heart_beat_receive_ms < 0:
            raise ValueError("heart-beat intervals must not be negative")
        if self.heart_beat_grace_factor < 1.0:
            raise ValueError("heart_beat_grace_factor must be at least 1")
        if self.connect_timeout_s <= 0 or self.prefetch < 1:
            raise ValueError("connect_timeout_s and prefetch must be positive")
        if self.max_writes_in_flight_per_connection < 1 or self.write_buffer_high_bytes < 1:
            raise ValueError("flow-control limits must be positive")
        if (
            min(
                self.max_connections,
                self.max_subscriptions_per_connection,
                self.max_transactions_per_connection,
                self.max_transaction_bytes,
                self.max_body_memory_bytes,
                self.max_destination_messages,
                self.max_pending_messages,
            )
            < 1
            or self.max_redeliveries < 0
        ):
            raise ValueError("connection, subscription and transaction limits must be positive")
        if self.flow_control_timeout_s <= 0:
            raise ValueError("flow_control_timeout_s must be positive")
