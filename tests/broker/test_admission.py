"""The admission budget both listeners use: networks by prefix, limits per network and in all,
and which waiting connection a newcomer displaces (broker/admission.py, sans-I/O)."""

from __future__ import annotations

from primacy.broker.admission import LOCAL, Budget, ByteBudget, Networks


def test_addresses_are_grouped_into_networks_by_prefix() -> None:
    networks = Networks()
    assert networks.of("127.0.0.2") == networks.of("127.0.0.5") == "127.0.0.0/24"
    assert networks.of("127.0.1.2") == "127.0.1.0/24"
    assert networks.of("2001:db8::1") == networks.of("2001:db8::ffff:1") == "2001:db8::/64"
    assert networks.of("::ffff:192.0.2.7") == "192.0.2.0/24"  # a dual-stack listener's IPv4
    assert networks.of("fe80::1%eth0") == "fe80::/64"
    assert networks.of(None) == networks.of("/run/x.sock") == LOCAL
    assert Networks(ipv4_prefix=32).of("127.0.0.2") == "127.0.0.2/32"


def test_a_full_network_displaces_its_own_oldest_waiting_and_never_a_served_one() -> None:
    budget: Budget[str] = Budget(total=10, per_network=2)
    assert budget.take("10.0.0.1", "a").admitted
    assert budget.take("10.0.0.2", "b").admitted
    verdict = budget.take("10.0.0.3", "c")
    assert verdict.admitted and verdict.displaced == ("a",)
    budget.settle("b")
    budget.settle("c")
    refused = budget.take("10.0.0.4", "d")
    assert not refused.admitted and refused.refused_by == "network"
    assert budget.take("10.0.1.1", "e").admitted  # another network is not affected


def test_a_full_budget_displaces_from_the_network_holding_the_most() -> None:
    budget: Budget[str] = Budget(total=4, per_network=3)
    for name in ("a1", "a2", "a3"):
        assert budget.take("10.0.0.1", name).admitted
    assert budget.take("10.0.1.1", "b1").admitted
    verdict = budget.take("10.0.2.1", "c1")  # 10.0.0.0/24 holds 3, the newcomer's none
    assert verdict.admitted and verdict.displaced == ("a1",)
    # Between equals nobody is displaced: the newcomer is refused instead.
    budget = Budget(total=2, per_network=2)
    assert budget.take("10.0.0.1", "a").admitted and budget.take("10.0.1.1", "b").admitted
    refused = budget.take("10.0.2.1", "c")
    assert not refused.admitted and refused.refused_by == "total"


def test_a_newcomer_of_the_fullest_network_displaces_its_own_when_the_budget_is_full() -> None:
    budget: Budget[str] = Budget(total=2, per_network=16)
    assert budget.take("127.0.0.2", "slow1").admitted and budget.take("127.0.0.3", "slow2").admitted
    verdict = budget.take("127.0.0.1", "health check")
    assert verdict.admitted and verdict.displaced == ("slow1",)


def test_room_is_given_back_at_once_and_a_connection_waiting_again_is_the_newest() -> None:
    budget: Budget[str] = Budget(total=10, per_network=2)
    budget.take("10.0.0.1", "a")
    budget.take("10.0.0.1", "b")
    budget.release("a")
    budget.release("a")  # harmless
    assert budget.held("10.0.0.0/24") == 1 and len(budget) == 1
    budget.take("10.0.0.1", "c")
    budget.settle("b")
    budget.wait("b")  # an idle kept-alive connection: displaceable again, after c
    assert budget.take("10.0.0.1", "d").displaced == ("c",)


def test_a_byte_budget_refuses_past_its_network_or_its_total_and_takes_back_what_is_given() -> None:
    budget = ByteBudget(total=1000, per_network=600)
    one, other = budget.networks.of("10.0.0.1"), budget.networks.of("10.0.1.1")
    assert budget.take(one, 600) is None
    assert budget.take(one, 1) == "network"
    assert budget.take(other, 401) == "total"
    assert budget.take(other, 400) is None
    assert (budget.held, budget.held_by(one), budget.held_by(other)) == (1000, 600, 400)
    budget.give(one, 600)
    assert budget.held_by(one) == 0 and budget.held == 400
    assert budget.take(one, 600) is None  # room again
