"""stomp.py consumers that go away without acknowledging: UNSUBSCRIBE, DISCONNECT, a dropped socket.

Whatever a consumer received and did not acknowledge goes back to the queue,
in order and marked ``redelivered``, and reaches another consumer; the
journal stores every message once and one ACK for each.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections import Counter
from typing import Any

import pytest

from primacy.store import tools
from tests.broker.nodes import Master, Masters, eventually, stored_send_ids, stored_state
from tests.broker.stomppy import StompPy

QUEUE = "/queue/a"

# A stomp.py consumer in its own process: prints each message id it receives,
# acknowledges one of them, says so, then waits to be killed. With ``reset``
# its socket lingers 0 s, so the kernel resets the connection (RST) when the
# process dies instead of closing it (FIN).
CONSUMER_SCRIPT = textwrap.dedent("""
    import socket, struct, sys, threading, time
    import stomp

    host, port, ack_mode, count, ack_index, prefetch, reset = sys.argv[1:]
    got, receipts = [], threading.Condition()
    seen = set()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            with receipts:
                got.append(frame)
                print("got", frame.headers["message-id"], flush=True)
                receipts.notify_all()

        def on_receipt(self, frame):
            with receipts:
                seen.add(frame.headers["receipt-id"])
                receipts.notify_all()

    connection = stomp.Connection12([(host, int(port))], heartbeats=(0, 0))
    connection.set_listener("l", Listener())
    connection.connect(wait=True)
    if reset == "1":
        option = struct.pack("ii", 1, 0)
        connection.transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, option)
    headers = {"receipt": "sub", "activemq.prefetchSize": prefetch}
    connection.subscribe("/queue/a", "s1", ack=ack_mode, headers=headers)
    with receipts:
        receipts.wait_for(lambda: len(got) >= int(count) and "sub" in seen, 10)
        if int(ack_index) >= 0:
            connection.ack(got[int(ack_index)].headers["ack"], receipt="ack")
            receipts.wait_for(lambda: "ack" in seen, 10)
    print("ready", len(got), "ack" in seen, flush=True)
    time.sleep(600)
""")


def pending_ids(masters: Masters) -> list[str]:
    return list(stored_state(masters.share).pending.get(QUEUE, {}))


def ack_counts(masters: Masters) -> Counter[str]:
    records: list[dict[str, Any]] = []
    tools.dump(masters.share, records.append)
    return Counter(r["message_id"] for r in records if r["type"] == "ACK")


def send_all(master: Master, ids: list[str]) -> None:
    producer = StompPy(master.address)
    for message_id in ids:
        assert producer.send(QUEUE, f"body of {message_id}", **{"message-id": message_id})
    producer.close()


class ConsumerProcess:
    """CONSUMER_SCRIPT running; ``kill()`` ends it with SIGKILL, no DISCONNECT ever sent."""

    def __init__(
        self,
        master: Master,
        ack_mode: str,
        count: int,
        ack_index: int,
        *,
        reset: bool,
        prefetch: int = 1000,
    ) -> None:
        host, port = master.address
        args = [host, port, ack_mode, count, ack_index, prefetch, int(reset)]
        self.process = subprocess.Popen(
            [sys.executable, "-c", CONSUMER_SCRIPT, *map(str, args)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.received: list[str] = []
        try:
            self._read_until_ready(count, ack_index >= 0)
        except BaseException:
            self.kill()
            raise

    def _read_until_ready(self, count: int, acked: bool) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            word, *rest = line.split()
            if word == "got":
                self.received.append(rest[0])
            elif word == "ready":
                assert rest == [str(count), str(acked)], f"the consumer process said {line!r}"
                return
        raise AssertionError(f"the consumer process exited with {self.process.wait()}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


# ---------------------------------------------------------------- UNSUBSCRIBE


@pytest.mark.parametrize("ack_mode", ["client", "client-individual"])
def test_after_unsubscribe_no_message_arrives_and_unacked_ones_go_to_another_consumer(
    masters: Masters, ack_mode: str
) -> None:
    master = masters.start()
    send_all(master, ["m-1", "m-2", "m-3"])
    leaving = StompPy(master.address)
    leaving.subscribe(QUEUE, "s1", ack=ack_mode)
    received = [leaving.message() for _ in range(3)]
    assert [m.headers["message-id"] for m in received] == ["m-1", "m-2", "m-3"]
    assert leaving.frame_with_receipt("ack", received[0].headers["ack"])
    assert leaving.frame_with_receipt("unsubscribe", "s1")

    send_all(master, ["m-4"])
    other = StompPy(master.address)
    other.subscribe(QUEUE, "s2", ack="client-individual")
    again = [other.message() for _ in range(3)]
    assert [(m.headers["message-id"], m.headers.get("redelivered")) for m in again] == [
        ("m-2", "true"),
        ("m-3", "true"),
        ("m-4", None),
    ]
    assert [m.body for m in again] == ["body of m-2", "body of m-3", "body of m-4"]
    assert all(m.headers["subscription"] == "s2" for m in again)
    assert leaving.no_message(), "a MESSAGE arrived on a subscription after its UNSUBSCRIBE"
    assert leaving.connection.is_connected(), "UNSUBSCRIBE must not end the connection"
    assert leaving.listener.errors == []

    for message in again:
        assert other.frame_with_receipt("ack", message.headers["ack"])
    assert pending_ids(masters) == []
    assert sorted(stored_send_ids(masters.share)) == ["m-1", "m-2", "m-3", "m-4"]
    assert ack_counts(masters) == Counter({"m-1": 1, "m-2": 1, "m-3": 1, "m-4": 1})
    leaving.close()
    other.close()


def test_an_ack_for_a_message_of_an_unsubscribed_subscription_settles_nothing(
    masters: Masters,
) -> None:
    master = masters.start()
    send_all(master, ["m-1"])
    consumer = StompPy(master.address)
    consumer.subscribe(QUEUE, "s1", ack="client-individual")
    first = consumer.message()
    assert consumer.frame_with_receipt("unsubscribe", "s1")
    # Too late: the message went back to the queue when the subscription ended.
    assert consumer.frame_with_receipt("ack", first.headers["ack"])
    assert pending_ids(masters) == ["m-1"]
    consumer.subscribe(QUEUE, "s1", ack="client-individual")  # the id may be used again
    again = consumer.message()
    assert (again.headers["message-id"], again.headers["redelivered"]) == ("m-1", "true")
    assert again.headers["ack"] != first.headers["ack"]
    assert consumer.frame_with_receipt("ack", again.headers["ack"])
    assert pending_ids(masters) == []
    assert ack_counts(masters) == Counter({"m-1": 1})
    consumer.close()


def test_unsubscribe_of_an_unknown_subscription_is_an_error(masters: Masters) -> None:
    master = masters.start()
    consumer = StompPy(master.address)
    assert not consumer.frame_with_receipt("unsubscribe", "nope")
    [error] = consumer.listener.errors
    assert error.headers["message"] == "PRIMACY-1510 invalid frame"
    assert "no subscription with id 'nope'" in error.body
    assert consumer.listener.disconnected.wait(5)


# ---------------------------------------------------------------- leaving without ACK


@pytest.mark.parametrize("how", ["DISCONNECT", "process killed", "connection reset"])
@pytest.mark.parametrize("ack_mode", ["client", "client-individual"])
def test_unacked_messages_of_a_consumer_that_goes_away_are_redelivered_to_another(
    masters: Masters, ack_mode: str, how: str
) -> None:
    master = masters.start()
    ids = [f"m-{n}" for n in range(1, 6)]
    send_all(master, ids)
    leaving: StompPy | ConsumerProcess
    if how == "DISCONNECT":
        leaving = StompPy(master.address)
        leaving.subscribe(QUEUE, "s1", ack=ack_mode)
        received = [leaving.message() for _ in ids]
        assert [m.headers["message-id"] for m in received] == ids
        assert all("redelivered" not in m.headers for m in received)
        assert leaving.frame_with_receipt("ack", received[1].headers["ack"])
    else:
        reset = how == "connection reset"
        leaving = ConsumerProcess(master, ack_mode, len(ids), 1, reset=reset)
        assert leaving.received == ids
    # client: the ACK of m-2 settles m-1 too; client-individual: m-2 only.
    settled = ["m-1", "m-2"] if ack_mode == "client" else ["m-2"]
    unacked = [m for m in ids if m not in settled]
    assert pending_ids(masters) == unacked
    # Another consumer is already waiting, with nothing for it yet: what comes back must
    # reach it without it subscribing again.
    other = StompPy(master.address)
    other.subscribe(QUEUE, "s2", ack="client-individual")
    assert other.no_message()

    if isinstance(leaving, StompPy):
        leaving.close()
    else:
        leaving.kill()
    again = [other.message() for _ in unacked]
    assert [m.headers["message-id"] for m in again] == unacked
    assert all(m.headers["redelivered"] == "true" for m in again)
    assert [m.body for m in again] == [f"body of {m}" for m in unacked]
    assert other.no_message()

    send_all(master, ["m-6"])
    late = other.message()
    assert late.headers["message-id"] == "m-6" and "redelivered" not in late.headers
    for message in [*again, late]:
        assert other.frame_with_receipt("ack", message.headers["ack"])
    eventually(lambda: pending_ids(masters) == [], "every message is acknowledged")
    assert sorted(stored_send_ids(masters.share)) == [*ids, "m-6"]
    assert ack_counts(masters) == Counter({m: 1 for m in [*ids, "m-6"]})
    assert master.service.stats()["redeliveries"] == len(unacked)
    other.close()


def test_a_killed_consumer_with_a_small_prefetch_loses_nothing_the_queue_still_held(
    masters: Masters,
) -> None:
    master = masters.start()
    ids = [f"m-{n}" for n in range(1, 11)]
    send_all(master, ids)
    leaving = ConsumerProcess(master, "client", 3, -1, reset=True, prefetch=3)
    assert leaving.received == ids[:3]  # the other seven wait for room
    leaving.kill()

    other = StompPy(master.address)
    other.subscribe(QUEUE, "s2", ack="client")
    again = [other.message() for _ in ids]
    assert [m.headers["message-id"] for m in again] == ids
    redelivered = [m.headers["message-id"] for m in again if m.headers.get("redelivered")]
    assert redelivered == ids[:3]
    assert other.frame_with_receipt("ack", again[-1].headers["ack"])  # cumulative
    assert pending_ids(masters) == []
    assert sorted(stored_send_ids(masters.share)) == sorted(ids)
    assert ack_counts(masters) == Counter({m: 1 for m in ids})
    other.close()
