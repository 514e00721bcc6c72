"""What a client may make the master keep (broker/state_limits.py): header values and destination
names by length, subscriptions and transactions by bytes against a connection's budget and the
node's. The real-node attacks are in test_memory_attacks.py."""

from __future__ import annotations

import pytest

from primacy.broker import codes
from primacy.broker.admission import ByteBudget
from primacy.broker.counters import Counters
from primacy.broker.frames import Frame
from primacy.broker.refusals import Refused
from primacy.broker.state_limits import (
    TRANSACTION_BYTES,
    StateAccount,
    check_header_values,
    subscription_bytes,
)
from primacy.broker.transactions import Transactions


def _refused(call: object, *args: object) -> Refused:
    with pytest.raises(Refused) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value


def test_header_values_and_destination_names_past_their_limits_are_refused() -> None:
    check_header_values(
        Frame.make("SEND", {"destination": "/queue/" + "d" * 57, "k": "v" * 256}), 256, 64
    )
    too_long = Frame.make("SEND", {"destination": "/queue/a", "receipt": "r" * 257})
    refusal = _refused(check_header_values, too_long, 256, 64)
    assert refusal.code == codes.HEADER_VALUE_TOO_LONG and "'receipt' header is 257" in str(refusal)
    # Counted in UTF-8 bytes: 129 characters of two bytes each are 258 bytes.
    wide = Frame.make("SEND", {"destination": "/queue/a", "k": "é" * 129})
    assert _refused(check_header_values, wide, 256, 64).code == codes.HEADER_VALUE_TOO_LONG
    named = Frame.make("SUBSCRIBE", {"destination": "/queue/" + "d" * 58, "id": "1"})
    refusal = _refused(check_header_values, named, 256, 64)
    assert refusal.code == codes.DESTINATION_NAME_TOO_LONG
    assert "65 bytes long; at most 64 (max_destination_name_bytes)" in str(refusal)


def test_a_connections_account_is_held_to_its_own_budget_and_the_nodes() -> None:
    budget = ByteBudget(total=10_000, per_network=6_000)
    first, second = StateAccount(budget, 4_000), StateAccount(budget, 4_000)
    first.charge(4_000, "a SUBSCRIBE")
    refusal = _refused(first.charge, 1, "a SUBSCRIBE")
    assert refusal.code == codes.CONNECTION_STATE_LIMIT
    refusal = _refused(second.charge, 2_001, "a BEGIN")
    assert refusal.code == codes.NETWORK_STATE_LIMIT and "max_state_bytes_per_network" in str(
        refusal
    )
    assert second.held == 0 and budget.held == 4_000  # nothing held for a refusal
    first.close()
    assert budget.held == 0
    second.charge(4_000, "a BEGIN")


def test_transactions_are_charged_their_name_and_frames_and_give_them_back() -> None:
    budget = ByteBudget(total=10**6, per_network=10**6)
    account = StateAccount(budget, 10**6)
    counters = Counters()
    transactions = Transactions(10, 10**6, counters, account)
    transactions.begin(Frame.make("BEGIN", {"transaction": "t1"}))
    assert account.held == TRANSACTION_BYTES + 2
    send = Frame.make("SEND", {"destination": "/queue/a", "transaction": "t1"}, b"x" * 1000)
    transactions.now_or_on_commit(send, list)
    assert account.held > TRANSACTION_BYTES + 1000
    transactions.abort(Frame.make("ABORT", {"transaction": "t1"}))
    assert account.held == 0 and budget.held == 0

    small = Transactions(10, 10**6, counters, StateAccount(budget, TRANSACTION_BYTES + 200))
    small.begin(Frame.make("BEGIN", {"transaction": "t1"}))
    refusal = _refused(small.now_or_on_commit, send, list)
    assert refusal.code == codes.CONNECTION_STATE_LIMIT
    assert counters.transactions_refused == 1


def test_a_subscription_costs_its_names_and_its_bookkeeping() -> None:
    assert subscription_bytes("/queue/a", "s1") - subscription_bytes("/queue/", "s") == 2
