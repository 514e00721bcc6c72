"""Prometheus metrics of one node: what the supervisor observes, plus figures from the snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from primacy.api.snapshot import StatusSnapshot

ROLES = ("starting", "slave", "acquired", "master", "demoting", "stopping", "stopped")
_FAST_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


class NodeMetrics:
    """The node's metric registry; the supervisor calls ``observe_*``, /metrics renders it."""

    def __init__(self, snapshot: Callable[[], StatusSnapshot]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.role_changes = Counter(
            "primacy_role_changes",
            "Role changes of this node, by new role",
            ["to"],
            registry=self.registry,
        )
        self.keepalive_seconds = Histogram(
            "primacy_keepalive_duration_seconds",
            "Duration of passed lease checks",
            buckets=_FAST_BUCKETS_S,
            registry=self.registry,
        )
        self.lock_attempts = Counter(
            "primacy_lock_attempts",
            "Lock attempts by a slave, by result",
            ["result"],
            registry=self.registry,
        )
        self.commit_seconds = Histogram(
            "primacy_journal_commit_latency_seconds",
            "Group commit: write, sync and fencing check of one batch",
            buckets=_FAST_BUCKETS_S,
            registry=self.registry,
        )
        self.batch_records = Histogram(
            "primacy_journal_batch_records",
            "Records per group-commit batch",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_SnapshotCollector(snapshot))

    def observe_commit(self, records: int, _bytes: int, seconds: float) -> None:
        self.commit_seconds.observe(seconds)
        self.batch_records.observe(records)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _SnapshotCollector(Collector):
    """Figures the node already keeps, read from the latest snapshot at scrape time."""

    def __init__(self, snapshot: Callable[[], StatusSnapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        current = self._snapshot()
        role = GaugeMetricFamily("primacy_role", "1 for this node's current role", labels=["role"])
        for name in ROLES:
            role.add_metric([name], 1.0 if current.role == name else 0.0)
        yield role
        yield GaugeMetricFamily(
            "primacy_serving",
            "1 while this node claims the master role",
            value=1.0 if current.is_serving_master() else 0.0,
        )
        yield GaugeMetricFamily(
            "primacy_epoch",
            "The epoch this node holds (0 if none)",
            value=float(current.epoch or 0),
        )
        yield GaugeMetricFamily(
            "primacy_paused",
            "1 while the group is paused",
            value=1.0 if current.paused else 0.0,
        )
        journal = current.journal
        yield CounterMetricFamily(
            "primacy_fenced_writes",
            "Records of earlier epochs fenced off when this master opened",
            value=float(journal.fenced_records if journal else 0),
        )
        yield CounterMetricFamily(
            "primacy_damaged_batches",
            "Damaged journal batches found when this master opened",
            value=float(journal.damaged_batches if journal else 0),
        )
        broker = current.broker
        yield CounterMetricFamily(
            "primacy_messages_in",
            "Messages stored (SENDs acknowledged)",
            value=float(broker.messages_in if broker else 0),
        )
        yield CounterMetricFamily(
            "primacy_journal_loop_wakeups",
            "Times the broker's event loop woke for completed journal writes (at most one a batch)",
            value=float(broker.journal_wakeups if broker else 0),
        )
        yield CounterMetricFamily(
            "primacy_messages_out",
            "Messages delivered to consumers",
            value=float(broker.messages_out if broker else 0),
        )
        refused = CounterMetricFamily(
            "primacy_limit_refusals",
            "Frames and connections refused by a broker limit (docs/stomp.md, Limits)",
            labels=["limit"],
        )
        for limit, stat in _LIMIT_REFUSALS.items():
            refused.add_metric([limit], float(getattr(broker, stat) if broker else 0))
        yield refused
        yield CounterMetricFamily(
            "primacy_dead_lettered",
            "Messages moved to their dead-letter queue after max_redeliveries",
            value=float(broker.dead_lettered if broker else 0),
        )
        yield GaugeMetricFamily(
            "primacy_body_memory_bytes",
            "Bodies of unacknowledged messages held in memory (max_body_memory_bytes)",
            value=float(broker.body_memory_bytes if broker else 0),
        )
        logins = CounterMetricFamily(
            "primacy_stomp_logins",
            "STOMP logins checked against the users file, by outcome",
            labels=["outcome"],
        )
        logins.add_metric(["ok"], float(broker.logins_ok if broker else 0))
        logins.add_metric(["failed"], float(broker.logins_failed if broker else 0))
        yield logins
        yield CounterMetricFamily(
            "primacy_tls_handshakes_failed",
            "STOMP connections dropped in the TLS handshake (plaintext, refused certificate)",
            value=float(broker.tls_handshakes_failed if broker else 0),
        )
        yield CounterMetricFamily(
            "primacy_stomp_unauthorized",
            "SENDs and SUBSCRIBEs refused: outside the user's destinations",
            value=float(broker.unauthorized if broker else 0),
        )
        yield CounterMetricFamily(
            "primacy_sends_held",
            "SENDs that waited for room (max_destination_messages, max_pending_messages)",
            value=float(broker.sends_held if broker else 0),
        )
        yield GaugeMetricFamily(
            "primacy_sends_waiting",
            "Connections whose SEND waits for room now",
            value=float(broker.sends_waiting if broker else 0),
        )
        yield GaugeMetricFamily(
            "primacy_messages_unacknowledged",
            "Messages stored and not yet acknowledged on this master (max_pending_messages)",
            value=float(broker.messages_unacknowledged if broker else 0),
        )
        yield GaugeMetricFamily(
            "primacy_destinations",
            "Destinations with messages or subscriptions on this master",
            value=float(broker.destinations if broker else 0),
        )


# The label of each limit in primacy_limit_refusals, and the broker figure that counts it.
_LIMIT_REFUSALS = {
    "max_connections": "connections_refused",
    "max_subscriptions_per_connection": "subscriptions_refused",
    "transactions": "transactions_refused",
    "flow_control": "sends_refused_full",
}
