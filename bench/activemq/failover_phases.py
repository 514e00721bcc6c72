"""The comparison's failover phases: kill -9 of each group's master, then (issue 28) of an
exec group's guardian and broker JVM, each timed to the first RECEIPT after it, and the
failover queues drained against what was receipted (``bench/compare_activemq.py``)."""

from __future__ import annotations

import random
import time
from collections import Counter

from bench.activemq.brokers import HaGroup
from bench.activemq.figures import (
    AMQ_DEFAULTS,
    FAILOVER,
    FAILOVER_GUARDIAN,
    FAILOVER_JVM,
    FAILOVER_STOCK,
    PRIMACY,
    Loss,
    Results,
)
from bench.activemq.progress import say, slug
from bench.activemq.under_primacy import ActiveMQUnderPrimacy
from bench.activemq.workload import FailoverSender, OurClient, StockStompClient, drain

FAILOVER_QUEUE = "/queue/failover"
RECEIPTS_BEFORE_KILL = 20  # the kill lands in a steady stream of sends, not at its start
RECEIPTS_AFTER_FAILOVER = 10
KILL_PHASE_JITTER_S = 0.05  # kills land at a random point of a send/receipt cycle
FAILOVER_TIMEOUT_S = 90.0
REDRAIN_AFTER_S = 10.0


def one_failover(
    group: HaGroup, sender: FailoverSender, not_before: float = 0.0
) -> tuple[float, float]:
    """kill -9 of ``group``'s master -> first RECEIPT from its successor: when the kill came
    (``time.monotonic``, no sooner than ``not_before``) and how long it took, in seconds."""
    # The spacing is waited out before the sender resumes: sending through it made the warm
    # group's phase carry fifty times the cold group's traffic (144 182 receipted against
    # 2 621 in the run of 2026-11-27 07:05), and each new JVM replay that much more journal.
    time.sleep(max(0.0, not_before - time.monotonic()))
    sender.resume()
    sender.wait_receipts(RECEIPTS_BEFORE_KILL)
    time.sleep(random.uniform(0, KILL_PHASE_JITTER_S))
    generation = sender.generation
    killed_at = group.kill_master()
    took = sender.first_receipt_after(killed_at, generation, FAILOVER_TIMEOUT_S)
    sender.wait_receipts(RECEIPTS_AFTER_FAILOVER)
    sender.pause()  # idle while the other groups are measured
    group.restore()
    return killed_at, took


def count_losses(results: Results, key: str, group: HaGroup, senders: list[FailoverSender]) -> None:
    """Pause ``senders`` and drain the group's failover queue: what they had receipted and
    never came out, or came out twice, recorded under ``key``."""
    receipted: list[str] = []
    for sender in senders:
        sender.pause()
        receipted += sender.receipted_ids()

    def drained() -> Counter[str]:
        return drain(
            group.master_address,
            FAILOVER_QUEUE,
            idle_s=3.0,
            on_reconnect=lambda to: say(f"  {key}: the drain's connection dropped; again to {to}"),
        )

    delivered = drained()
    loss = Loss.count(receipted, delivered)
    if loss.lost:
        # A drain that stopped early looks exactly like a loss (a full run once counted 1 652
        # it could not explain): look again before calling them lost, and keep their ids.
        say(f"  {key}: {loss.lost} receipted not drained; again in {REDRAIN_AFTER_S:.0f} s")
        time.sleep(REDRAIN_AFTER_S)
        delivered += drained()
        found = loss.lost - Loss.count(receipted, delivered).lost
        say(f"  {key}: the second drain found {found} of the {loss.lost}")
        loss = Loss.count(receipted, delivered)
        results.lost_ids[key] = sorted(i for i in set(receipted) if delivered[i] == 0)
    results.losses[key] = loss
    say(f"  {key}: lost / duplicated {loss.show()}")


def failover_phase(
    results: Results, groups: dict[str, HaGroup], kills: int, default_kills: int
) -> None:
    senders = {
        label: FailoverSender(
            OurClient(group.stomp_addresses()), FAILOVER_QUEUE, f"f-{slug(label)}"
        )
        for label, group in groups.items()
    }
    # primacy's failover as stock stomp.py sees it too (issue 17), kill for kill.
    stock = FailoverSender(
        StockStompClient(groups[PRIMACY].stomp_addresses()), FAILOVER_QUEUE, "f-stock"
    )
    try:
        for index in range(max(kills, default_kills)):
            for label, group in groups.items():
                if index >= (default_kills if label == AMQ_DEFAULTS else kills):
                    continue
                _, took = one_failover(group, senders[label])
                results.add(FAILOVER, label, took)
                say(f"  kill {index + 1}, {label}: first RECEIPT after {took * 1000:.0f} ms")
                if label == PRIMACY:
                    _, took = one_failover(group, stock)
                    results.add(FAILOVER_STOCK, label, took)
                    say(f"  kill {index + 1}, {label}, stock stomp.py: {took * 1000:.0f} ms")
        for label, group in groups.items():
            sender = senders.pop(label)
            count_losses(results, label, group, [sender, stock] if label == PRIMACY else [sender])
            sender.close()
    finally:
        stock.close()
        for sender in senders.values():
            sender.close()


# HAProxy as the warm standby's recipe sets it (docs/operator-guide.md, "A warm standby behind
# a gate"): a failover that takes well under a second is not to wait for HAProxy, and one
# slow /master answer must not cut a live master's sessions (issue 47).
WARM_CHECKS = "inter 100ms fastinter 100ms fall 2 rise 1"
WARM_CONNECT_TIMEOUT = "100ms"
WARM_CHECK_TIMEOUT = "1s"


def victim_phase(results: Results, groups: dict[str, ActiveMQUnderPrimacy], kills: int) -> None:
    """Issue 28: failover from a kill of the master's guardian, then of its broker JVM."""
    senders = {
        label: FailoverSender(
            OurClient(group.stomp_addresses()), FAILOVER_QUEUE, f"v-{slug(label)}"
        )
        for label, group in groups.items()
    }
    try:
        for victim, metric in (("guardian", FAILOVER_GUARDIAN), ("jvm", FAILOVER_JVM)):
            for index in range(kills):
                for label, group in groups.items():
                    group.victim = victim
                    # A node that gives the lock up for its broker's exits (a warm group's,
                    # at the first) holds off crash_loop_hold_off_ms from its last counted
                    # exit: a kill while the only standby holds off measures the hold-off.
                    # So wait until no node says it holds off (/status), not a fixed time
                    # from the last kill: a later exit (a crash of the standby's broker once
                    # it served) starts the hold-off later.
                    group.wait_while_a_node_holds_off()
                    lapses = group.claim_lapse_kills()
                    _, took = one_failover(group, senders[label])
                    results.add(metric, label, took)
                    # A sample whose failover included a guardian's kill of a broker for a
                    # claim confirmed late measures the host's load, not the failover: flagged.
                    flag = ""
                    if group.claim_lapse_kills() > lapses:
                        results.flag(metric, label, len(results.samples[(metric.key, label)]) - 1)
                        flag = " (FLAGGED: a claim-lapse kill during it, PRIMACY-1106)"
                    say(f"  kill {index + 1} of the {victim}, {label}: {took * 1000:.0f} ms{flag}")
        for label, group in groups.items():
            group.victim = "supervisor"
            sender = senders.pop(label)
            count_losses(results, f"{label}, guardian and JVM kills", group, [sender])
            sender.close()
    finally:
        for sender in senders.values():
            sender.close()
