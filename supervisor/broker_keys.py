"""The keys handed to the built-in STOMP broker: who may connect, TLS, and its limits.

Declared here, apart from the node's own keys, because there are many and they
mean nothing to the role loop; ``NodeConfig`` (``config.py``) inherits them and
``NodeConfig.broker_config`` hands them to ``broker.config.BrokerConfig``, where
their defaults live.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from primacy.broker.config import BrokerConfig
from primacy.supervisor.config_keys import Float, Int, key

BROKER_DEFAULTS = BrokerConfig()


class BrokerKeys(BaseModel):
    """The built-in broker's keys (``stomp_*`` and the ``max_*`` limits)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stomp_users: Path | None = key(
        None,
        "the STOMP users file (primacy users add FILE NAME): CONNECT must log in as one of its "
        "users, who may use only their destinations; without it every client is let in",
        metavar="FILE",
    )
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
    )  # The STOMP connector's limits: defaults from broker.config.BrokerConfig.
    max_connections: Int = key(
        BROKER_DEFAULTS.max_connections,
        "refuse STOMP connections beyond this many at once",
        metavar="N",
        ge=1,
        le=1_000_000,
    )
    max_subscriptions_per_connection: Int = key(
        BROKER_DEFAULTS.max_subscriptions_per_connection,
        "refuse a SUBSCRIBE beyond this many on one connection",
        metavar="N",
        ge=1,
        le=1_000_000,
    )
    max_transactions_per_connection: Int = key(
        BROKER_DEFAULTS.max_transactions_per_connection,
        "refuse a BEGIN beyond this many open transactions on one connection",
        metavar="N",
        ge=1,
        le=100_000,
    )
    max_transaction_bytes: Int = key(
        BROKER_DEFAULTS.max_transaction_bytes,
        "refuse a frame that would make a connection's open transactions hold more than this ",
        metavar="BYTES",
        ge=1024,
        le=2**40,
    )
    max_body_memory_bytes: Int = key(
        BROKER_DEFAULTS.max_body_memory_bytes,
        "bodies of unacknowledged messages the master keeps in memory; past this, new bodies "
        "stay in the journal and are read back when their turn comes",
        metavar="BYTES",
        ge=1,
        le=2**44,
    )
    max_destination_messages: Int = key(
        BROKER_DEFAULTS.max_destination_messages,
        "a SEND to a destination holding this many unacknowledged messages waits for room "
        "(or gets an ERROR with if-full:error)",
        metavar="N",
        ge=1,
        le=10**9,
    )
    max_pending_messages: Int = key(
        BROKER_DEFAULTS.max_pending_messages,
        "a SEND waits for room while the broker holds this many unacknowledged messages in all",
        metavar="N",
        ge=1,
        le=10**9,
    )
    flow_control_timeout_s: Float = key(
        BROKER_DEFAULTS.flow_control_timeout_s,
        "a SEND that waited this long for room gets an ERROR; nothing is stored",
        metavar="SECONDS",
        gt=0,
        le=86_400,
    )
    max_redeliveries: Int = key(
        BROKER_DEFAULTS.max_redeliveries,
        "a message that comes back unacknowledged (NACK, unsubscribe, disconnect) this many "
        "times more moves to /queue/DLQ.<name>",
        metavar="N",
        ge=0,
        le=1_000_000,
    )
