"""Prometheus metrics of one node, every family declared once, in ``FAMILIES``.

A row is what a dashboard sees (name, type, help, labels) and where the value comes from.
``Observed`` families the supervisor feeds as things happen (``NodeMetrics``'s counters and
histograms); ``FromSnapshot`` families are read from the latest status snapshot at scrape time,
one ``Reading`` per label set. A reading names the ``/status`` field it shows, and ``figure``
checks that field against the snapshot's types when this module is imported: a mistyped field
fails at import instead of reporting 0. docs/operator-guide.md's metrics table is tested
against ``FAMILIES`` (tests/api/test_metrics.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from primacy.api.metric_families import (
    Family,
    FromCertificates,
    FromSnapshot,
    Observed,
    Reading,
    figure,
)
from primacy.api.snapshot import StatusSnapshot
from primacy.share.records import Role

ROLES = tuple(str(role) for role in Role)
_FAST_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


def _role_is(role: str) -> Reading:
    return Reading("role", lambda snapshot: 1.0 if snapshot.role == role else 0.0)


_SERVING = Reading("serving", lambda snapshot: 1.0 if snapshot.is_serving_master() else 0.0)


# Every family /metrics exports, in the order it exports them. Prometheus adds ``_total`` to
# a counter's name. Names, types and help texts are what dashboards and alerts match: change
# one only as a breaking change, in the changelog.
FAMILIES: tuple[Family, ...] = (
    Observed("primacy_role_changes", "counter", "Role changes of this node, by new role", ("to",)),
    Observed(
        "primacy_coordination_session_changes",
        "counter",
        "State changes of the coordination service's session, by new state",
        ("state",),
    ),
    Observed(
        "primacy_keepalive_duration_seconds",
        "histogram",
        "Duration of passed lease checks",
        buckets=_FAST_BUCKETS_S,
    ),
    Observed(
        "primacy_lock_attempts", "counter", "Lock attempts by a slave, by result", ("result",)
    ),
    Observed(
        "primacy_journal_commit_latency_seconds",
        "histogram",
        "Group commit: write, sync and fencing check of one batch",
        buckets=_FAST_BUCKETS_S,
    ),
    Observed(
        "primacy_journal_batch_records",
        "histogram",
        "Records per group-commit batch",
        buckets=_BATCH_BUCKETS,
    ),
    FromSnapshot(
        "primacy_role",
        "gauge",
        "1 for this node's current role",
        {(role,): _role_is(role) for role in ROLES},
        ("role",),
    ),
    FromSnapshot(
        "primacy_serving", "gauge", "1 while this node claims the master role", {(): _SERVING}
    ),
    FromSnapshot(
        "primacy_epoch", "gauge", "The epoch this node holds (0 if none)", {(): figure("epoch")}
    ),
    FromSnapshot("primacy_paused", "gauge", "1 while the group is paused", {(): figure("paused")}),
    FromSnapshot(
        "primacy_lock_keep_alive_period_seconds",
        "gauge",
        "This node's lock_keep_alive_period_ms in seconds: how often a master checks its lease",
        {(): figure("lock_keep_alive_period_s")},
    ),
    FromSnapshot(
        "primacy_eligible_standby",
        "gauge",
        "1 while this node is a slave that would take over: its lock attempts reach the share, "
        "its priority is not never, it is not held off",
        {(): Reading("eligible_standby", lambda snapshot: float(snapshot.is_eligible_standby()))},
    ),
    FromSnapshot(
        "primacy_coordinator_behind_share",
        "gauge",
        "1 while this node refuses to claim: the coordinator's epoch counter is below an epoch "
        "the share's journal shows was served",
        {(): figure("coordinator_behind_share")},
    ),
    FromSnapshot(
        "primacy_share_unusable",
        "gauge",
        "1 while this node claims no epoch: its user cannot use a file or directory on the share "
        "(owner or mode)",
        {(): Reading("share_unusable", lambda snapshot: 1.0 if snapshot.share_unusable else 0.0)},
    ),
    FromSnapshot(
        "primacy_fenced_writes",
        "counter",
        "Records of earlier epochs fenced off when this master opened",
        {(): figure("journal.fenced_records")},
    ),
    FromSnapshot(
        "primacy_damaged_batches",
        "counter",
        "Damaged journal batches found when this master opened",
        {(): figure("journal.damaged_batches")},
    ),
    FromSnapshot(
        "primacy_journal_follow_lag_bytes",
        "gauge",
        "A slave's journal follower: bytes the segments held at its last read past what it applied",
        {(): figure("follower.lag_bytes")},
    ),
    FromSnapshot(
        "primacy_journal_follow_lag_seconds",
        "gauge",
        "A slave's journal follower: seconds since it was last at the journal's end (0: it is)",
        {(): figure("follower.lag_s")},
    ),
    FromSnapshot(
        "primacy_journal_follower_without_state",
        "gauge",
        "1 while a slave's journal follower holds no state a takeover could start from "
        "(starting, or dropped); 0 when following, on a master, or with following off",
        {
            (): Reading(
                "follower.mode",
                lambda snapshot: float(
                    snapshot.follower is not None
                    and snapshot.follower.mode in ("starting", "fallen_back")
                ),
            )
        },
    ),
    FromSnapshot(
        "primacy_journal_follower_fallbacks",
        "counter",
        "Times a slave's journal follower dropped its state (damage, a segment changed, a new "
        "epoch's fence, a newer checkpoint)",
        {(): figure("follower.fallbacks")},
    ),
    FromSnapshot(
        "primacy_messages_in",
        "counter",
        "Messages stored (SENDs acknowledged)",
        {(): figure("broker.messages_in")},
    ),
    FromSnapshot(
        "primacy_journal_loop_wakeups",
        "counter",
        "Times the broker's event loop woke for completed journal writes (at most one a batch)",
        {(): figure("broker.journal_wakeups")},
    ),
    FromSnapshot(
        "primacy_messages_out",
        "counter",
        "Messages delivered to consumers",
        {(): figure("broker.messages_out")},
    ),
    FromSnapshot(
        "primacy_limit_refusals",
        "counter",
        "Frames and connections refused by a broker limit (docs/stomp.md, Limits)",
        {
            ("max_connections",): figure("broker.connections_refused"),
            ("max_subscriptions_per_connection",): figure("broker.subscriptions_refused"),
            ("transactions",): figure("broker.transactions_refused"),
            ("flow_control",): figure("broker.sends_refused_full"),
        },
        ("limit",),
    ),
    FromSnapshot(
        "primacy_dead_lettered",
        "counter",
        "Messages moved to their dead-letter queue after max_redeliveries",
        {(): figure("broker.dead_lettered")},
    ),
    FromSnapshot(
        "primacy_messages_expired",
        "counter",
        "Messages that passed their expires header before delivery: dropped, or moved to "
        "their dead-letter queue if persistent",
        {(): figure("broker.messages_expired")},
    ),
    FromSnapshot(
        "primacy_temp_queues",
        "gauge",
        "Temporary queues (/temp-queue/NAME) of the connections open now",
        {(): figure("broker.temp_queues")},
    ),
    FromSnapshot(
        "primacy_temp_queue_sends_dropped",
        "counter",
        "SENDs to a temporary queue whose connection was gone: receipted, not stored",
        {(): figure("broker.temp_queue_sends_dropped")},
    ),
    FromSnapshot(
        "primacy_durable_subscriptions",
        "gauge",
        "Durable topic subscriptions, their subscriber attached or away",
        {(): figure("broker.durable_subscriptions")},
    ),
    FromSnapshot(
        "primacy_durable_messages_held",
        "gauge",
        "Topic messages held for durable subscriptions whose subscriber is away",
        {(): figure("broker.durable_messages_held")},
    ),
    FromSnapshot(
        "primacy_durable_oldest_age_seconds",
        "gauge",
        "Age of the oldest topic message held for a durable subscription whose subscriber "
        "is away (0: none held)",
        {(): figure("broker.durable_oldest_age_s")},
    ),
    FromSnapshot(
        "primacy_topic_messages_dropped",
        "counter",
        "Copies of topic messages dropped for non-durable subscribers too far behind",
        {(): figure("broker.topic_messages_dropped")},
    ),
    FromSnapshot(
        "primacy_body_memory_bytes",
        "gauge",
        "Bodies of unacknowledged messages held in memory (max_body_memory_bytes)",
        {(): figure("broker.body_memory_bytes")},
    ),
    FromSnapshot(
        "primacy_stomp_logins",
        "counter",
        "STOMP logins checked against the users file, by outcome",
        {("ok",): figure("broker.logins_ok"), ("failed",): figure("broker.logins_failed")},
        ("outcome",),
    ),
    FromSnapshot(
        "primacy_tls_handshakes_failed",
        "counter",
        "STOMP connections dropped in the TLS handshake (plaintext, refused certificate)",
        {(): figure("broker.tls_handshakes_failed")},
    ),
    FromSnapshot(
        "primacy_stomp_unauthorized",
        "counter",
        "SENDs and SUBSCRIBEs refused: outside the user's destinations",
        {(): figure("broker.unauthorized")},
    ),
    FromSnapshot(
        "primacy_sends_held",
        "counter",
        "SENDs that waited for room (max_destination_messages, max_pending_messages)",
        {(): figure("broker.sends_held")},
    ),
    FromSnapshot(
        "primacy_sends_waiting",
        "gauge",
        "Connections whose SEND waits for room now",
        {(): figure("broker.sends_waiting")},
    ),
    FromSnapshot(
        "primacy_messages_unacknowledged",
        "gauge",
        "Messages stored and not yet acknowledged on this master (max_pending_messages)",
        {(): figure("broker.messages_unacknowledged")},
    ),
    FromSnapshot(
        "primacy_destinations",
        "gauge",
        "Destinations with messages or subscriptions on this master",
        {(): figure("broker.destinations")},
    ),
    FromCertificates(
        "primacy_tls_certificate_expiry_timestamp_seconds",
        "gauge",
        "When the certificate a TLS listener serves (stomp, http) expires: its notAfter, Unix time",
    ),
)

if len({family.name for family in FAMILIES}) != len(FAMILIES):
    raise ValueError("a metric family is declared twice in FAMILIES")


class NodeMetrics:
    """The node's metric registry; the supervisor feeds the ``Observed`` families through
    these attributes, /metrics renders every family."""

    def __init__(
        self,
        snapshot: Callable[[], StatusSnapshot],
        certificate_expiries: Callable[[], Mapping[str, float]] = dict,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._observed = {
            family.name: _observed_metric(family, self.registry)
            for family in FAMILIES
            if isinstance(family, Observed)
        }
        self.role_changes = self._counter("primacy_role_changes")
        self.keepalive_seconds = self._histogram("primacy_keepalive_duration_seconds")
        self.lock_attempts = self._counter("primacy_lock_attempts")
        self.session_changes = self._counter("primacy_coordination_session_changes")
        self.commit_seconds = self._histogram("primacy_journal_commit_latency_seconds")
        self.batch_records = self._histogram("primacy_journal_batch_records")
        self.registry.register(_ScrapeTimeCollector(snapshot, certificate_expiries))

    def observe_commit(self, records: int, _bytes: int, seconds: float) -> None:
        self.commit_seconds.observe(seconds)
        self.batch_records.observe(records)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def _counter(self, name: str) -> Counter:
        metric = self._observed[name]
        assert isinstance(metric, Counter), name
        return metric

    def _histogram(self, name: str) -> Histogram:
        metric = self._observed[name]
        assert isinstance(metric, Histogram), name
        return metric


def _observed_metric(family: Observed, registry: CollectorRegistry) -> Counter | Histogram:
    if family.kind == "counter":
        return Counter(family.name, family.help, family.labels, registry=registry)
    return Histogram(
        family.name, family.help, family.labels, buckets=family.buckets, registry=registry
    )


class _ScrapeTimeCollector(Collector):
    """The ``FromSnapshot`` families, read from the latest snapshot at scrape time, and the
    ``FromCertificates`` ones, from the certificate files."""

    def __init__(
        self,
        snapshot: Callable[[], StatusSnapshot],
        certificate_expiries: Callable[[], Mapping[str, float]],
    ) -> None:
        self._snapshot = snapshot
        self._certificate_expiries = certificate_expiries

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The families without samples: the registry checks names without a snapshot."""
        for family in FAMILIES:
            if isinstance(family, FromSnapshot | FromCertificates):
                yield _empty(family)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        current = self._snapshot()
        for family in FAMILIES:
            if isinstance(family, FromSnapshot):
                exported = _empty(family)
                for values, reading in family.samples.items():
                    exported.add_metric(list(values), reading.read(current))
                yield exported
            elif isinstance(family, FromCertificates):
                exported = _empty(family)
                for listener, expires_unix_s in sorted(self._certificate_expiries().items()):
                    exported.add_metric([listener], expires_unix_s)
                yield exported


def _empty(family: FromSnapshot | FromCertificates) -> GaugeMetricFamily | CounterMetricFamily:
    kind = GaugeMetricFamily if family.kind == "gauge" else CounterMetricFamily
    return kind(family.name, family.help, labels=list(family.labels))
