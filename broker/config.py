"""The connector's settings: limits, heart-beats, flow control; validated once.

``BrokerKeys`` are the settings an operator sets (keys of the node's config file and
flags of ``primacy run``, which the node's configuration inherits as they are);
``BrokerConfig`` adds the ones primacy fixes itself.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from primacy.broker.event_loop import EventLoopChoice
from primacy.broker.frames import FrameLimits
from primacy.store.config_keys import Float, Int, key


class BrokerKeys(BaseModel):
    """Who may connect, TLS, and the limits against one client exhausting the master
    (docs/operator-guide.md, "Limits"); each is declared here and nowhere else."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Who may connect (users.py); None: every client, unauthenticated.
    stomp_users: Path | None = key(
        None,
        "the STOMP users file (primacy users add FILE NAME): CONNECT must log in as one of its "
        "users, who may use only their destinations; without it every client is let in",
        metavar="FILE",
    )
    # TLS for the listener (tls.py): PEM certificate chain and key; with a CA, mutual TLS.
    stomp_tls_cert: Path | None = key(
        None,
        "serve the STOMP listener over TLS with this PEM certificate chain (with stomp_tls_key); "
        "a new file is picked up without a restart",
        metavar="FILE",
    )
    stomp_tls_key: Path | None = key(
        None, "the PEM private key of stomp_tls_cert (mode 600)", metavar="FILE"
    )
    stomp_tls_ca: Path | None = key(
        None,
        "require client certificates signed by this PEM CA (mutual TLS) on the STOMP listener",
        metavar="FILE",
    )
    stomp_event_loop: EventLoopChoice = key(
        "auto",
        "the STOMP broker's event loop: uvloop, asyncio, or auto (the one PRIMACY_STOMP_EVENT_LOOP "
        "names if set, else uvloop where it is installed)",
    )
    max_connections: Int = key(
        1_000,
        "refuse STOMP connections beyond this many at once",
        metavar="N",
        ge=1,
        le=1_000_000,
    )
    # Admission by network (admission.py): one host, whatever its addresses, cannot take every
    # connection or every login slot. Prefixes: what one site or host is usually given.
    network_prefix_ipv4: Int = key(
        24,
        "clients whose IPv4 addresses share this many leading bits count as one network in the "
        "STOMP and HTTP listeners' per-network limits",
        metavar="BITS",
        ge=8,
        le=32,
    )
    network_prefix_ipv6: Int = key(
        64,
        "the same for IPv6 addresses",
        metavar="BITS",
        ge=16,
        le=128,
    )
    max_connections_per_network: Int | None = key(
        None,
        "refuse STOMP connections from one network beyond this many at once",
        metavar="N",
        default_text="half of max_connections",
        ge=1,
        le=1_000_000,
    )
    max_unauthenticated_per_network: Int | None = key(
        None,
        "STOMP connections from one network that have not sent CONNECT yet, at most; a new one "
        "past it closes that network's oldest",
        metavar="N",
        default_text="a quarter of max_connections",
        ge=1,
        le=1_000_000,
    )
    max_subscriptions_per_connection: Int = key(
        1_000,
        "refuse a SUBSCRIBE beyond this many on one connection",
        metavar="N",
        ge=1,
        le=1_000_000,
    )
    max_temp_queues_per_connection: Int = key(
        100,
        "refuse a new temporary queue (/temp-queue/NAME) beyond this many on one connection; "
        "they last as long as the connection",
        metavar="N",
        ge=1,
        le=100_000,
    )
    max_transactions_per_connection: Int = key(
        100,
        "refuse a BEGIN beyond this many open transactions on one connection",
        metavar="N",
        ge=1,
        le=100_000,
    )
    # Bytes of SENDs (body and headers) a connection's open transactions may hold in memory.
    max_transaction_bytes: Int = key(
        16 * 1024 * 1024,
        "refuse a frame that would make a connection's open transactions hold more than this",
        metavar="BYTES",
        ge=1024,
        le=2**40,
    )
    # What a frame may make the master keep or echo (state_limits.py): real clients' header
    # values (receipt ids, subscription ids, transaction names, properties) and destination
    # names are far shorter; ActiveMQ and RabbitMQ cap names too.
    max_header_value_bytes: Int = key(
        8 * 1024,
        "refuse a frame with a header value (a receipt id included) longer than this, in UTF-8",
        metavar="BYTES",
        ge=256,
        le=2**20,
    )
    max_destination_name_bytes: Int = key(
        1024,
        "refuse a SEND or SUBSCRIBE whose destination name is longer than this, in UTF-8",
        metavar="BYTES",
        ge=64,
        le=2**20,
    )
    # Subscriptions and open transactions, sized: each subscription's names and bookkeeping,
    # each transaction's name and the frames it holds (state_limits.py).
    max_state_bytes_per_connection: Int = key(
        32 * 1024 * 1024,
        "refuse a SUBSCRIBE, BEGIN or transaction frame that would make one connection's "
        "subscriptions and open transactions hold more than this",
        metavar="BYTES",
        ge=64 * 1024,
        le=2**40,
    )
    max_state_bytes: Int = key(
        256 * 1024 * 1024,
        "the same for every connection of the node together",
        metavar="BYTES",
        ge=64 * 1024,
        le=2**44,
    )
    max_state_bytes_per_network: Int | None = key(
        None,
        "the same for the connections of one network together",
        metavar="BYTES",
        default_text="half of max_state_bytes",
        ge=64 * 1024,
        le=2**44,
    )
    # Past this, a new message's body stays in the journal only and is read back when its
    # turn comes (a store cursor).
    max_body_memory_bytes: Int = key(
        128 * 1024 * 1024,
        "bodies of unacknowledged messages the master keeps in memory; past this, new bodies "
        "stay in the journal and are read back when their turn comes",
        metavar="BYTES",
        ge=1,
        le=2**44,
    )
    # Producer flow control (flow_control.py).
    max_destination_messages: Int = key(
        200_000,
        "a SEND to a destination holding this many unacknowledged messages waits for room "
        "(or gets an ERROR with if-full:error)",
        metavar="N",
        ge=1,
        le=10**9,
    )
    max_pending_messages: Int = key(
        1_000_000,
        "a SEND waits for room while the broker holds this many unacknowledged messages in all",
        metavar="N",
        ge=1,
        le=10**9,
    )
    flow_control_timeout_s: Float = key(
        30.0,
        "a SEND that waited this long for room gets an ERROR; nothing is stored",
        metavar="SECONDS",
        gt=0,
        le=86_400,
    )
    max_redeliveries: Int = key(
        6,
        "a message that comes back unacknowledged (NACK, unsubscribe, disconnect) this many "
        "times more moves to /queue/DLQ.<name>",
        metavar="N",
        ge=0,
        le=1_000_000,
    )

    @property
    def connections_per_network(self) -> int:
        return self.max_connections_per_network or max(1, self.max_connections // 2)

    @property
    def unauthenticated_per_network(self) -> int:
        return self.max_unauthenticated_per_network or max(1, self.max_connections // 4)

    @property
    def state_bytes_per_network(self) -> int:
        return self.max_state_bytes_per_network or max(1, self.max_state_bytes // 2)


class BrokerConfig(BrokerKeys):
    """Everything the STOMP connector needs besides the journal and the address."""

    frame_limits: FrameLimits = Field(default_factory=FrameLimits)
    # What the server offers in CONNECTED's heart-beat: it can send every
    # heart_beat_send_ms and wants to hear from the client every heart_beat_receive_ms.
    heart_beat_send_ms: int = Field(default=10_000, ge=0)
    heart_beat_receive_ms: int = Field(default=10_000, ge=0)
    # A client silent for this many negotiated intervals is cut off (slow or dead).
    heart_beat_grace_factor: float = Field(default=2.0, ge=1.0)
    # A connection that has not sent CONNECT within this time is closed.
    connect_timeout_s: float = Field(default=10.0, gt=0)
    # Deliveries outstanding (not acknowledged) per subscription, unless the
    # client asks for less with an ``activemq.prefetchSize`` header.
    prefetch: int = Field(default=1_000, ge=1)
    # A connection with this many journal writes in flight is not read from until
    # some complete: a producer that never waits cannot fill memory.
    max_writes_in_flight_per_connection: int = Field(default=10_000, ge=1)
    # Bytes queued on a socket before the broker stops sending it messages.
    write_buffer_high_bytes: int = Field(default=4 * 1024 * 1024, ge=1)
    server_name: str = "primacy"
    # After traffic, once no message moved for this long: glibc's malloc_trim(0) on a
    # thread, giving the heap's free pages back (heap_trim.py). 0: never.
    heap_trim_idle_s: float = Field(default=2.0, ge=0)
