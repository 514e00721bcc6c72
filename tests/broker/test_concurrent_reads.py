"""Connections whose frames arrive interleaved, each spread over many socket reads, are read
apart: every connection's reads go through one buffer on the broker's loop (connection.py)."""

from __future__ import annotations

import threading

from tests.broker.nodes import Masters, stored_state
from tests.broker.stomppy import StompPy

CLIENTS = 4
MESSAGES = 5
BODY_BYTES = 600 * 1024  # more than one read of the broker's 256 KiB buffer


def body_of(client: int, number: int) -> bytes:
    return bytes([65 + client]) * BODY_BYTES + f"-{client}-{number}".encode()


def test_large_frames_from_concurrent_clients_are_stored_intact(masters: Masters) -> None:
    master = masters.start()
    clients = [StompPy(master.address) for _ in range(CLIENTS)]
    receipted: list[bool] = []

    def send_all(index: int) -> None:
        for number in range(MESSAGES):
            body = body_of(index, number)
            receipted.append(
                clients[index].send("/queue/a", body, **{"message-id": f"{index}-{number}"})
            )

    threads = [threading.Thread(target=send_all, args=(index,)) for index in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for client in clients:
        client.close()
    assert receipted == [True] * (CLIENTS * MESSAGES)
    pending = stored_state(masters.share).pending["/queue/a"]
    assert len(pending) == CLIENTS * MESSAGES
    for message_id, location in pending.items():
        index, number = (int(part) for part in message_id.split("-"))
        assert master.store.read_message(location).payload == body_of(index, number), message_id
