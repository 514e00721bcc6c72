"""One scripted STOMP conversation through the broker's connection, commands, core and journal
writer, as this interpreter imports them; prints every byte each client was sent, as JSON.

Run as a script in a fresh process (``python -m tests.compiled.session``), once compiled and
once with ``PRIMACY_PURE_PYTHON=1``: tests/compiled/test_parity.py compares the two outputs.
Those modules cannot be compared in one process as the codec is (sources.py): a class run
from source cannot derive from a compiled one (``StompConnection`` from the ``StompCommands``
trait). The clients are ``StompConnection`` objects fed frames through a transport that keeps
what is written (as bench/hot_path.py does); the journal is a real ``JournalStore`` with a
real lease, committing with the policy ``sync`` (inline when the writer is idle).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from primacy.broker.config import BrokerConfig
from primacy.broker.connection import Admission, StompConnection
from primacy.broker.core import Broker
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore
from tests.harness.recorded_transport import Recorded

_WAIT_S = 10.0


def frame(command: str, body: str = "", **headers: str) -> bytes:
    lines = [command, *(f"{key.replace('_', '-')}:{value}" for key, value in headers.items())]
    return ("\n".join(lines) + "\n\n" + body + "\x00").encode()


async def until(done: Callable[[], bool]) -> None:
    """Wait for the broker's loop to make ``done()`` true (journal writes end on it)."""
    deadline = asyncio.get_running_loop().time() + _WAIT_S
    while not done():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("the conversation stalled")
        await asyncio.sleep(0.001)


async def conversation(store: JournalStore) -> dict[str, str]:
    config = BrokerConfig(heart_beat_send_ms=0, heart_beat_receive_ms=0)
    broker = Broker(store, config, asyncio.get_running_loop())
    admission = Admission.of(config)
    clients: dict[str, tuple[StompConnection, Recorded]] = {}

    def client(name: str, version: str = "1.2") -> Callable[[bytes], None]:
        connection, transport = StompConnection(broker, admission), Recorded()
        clients[name] = (connection, transport)
        connection.connection_made(transport)
        connection.data_received(frame("CONNECT", accept_version=version, host="parity"))
        return connection.data_received

    def sent(name: str) -> bytes:
        return bytes(clients[name][1].data)

    async def receipted(name: str, receipt: str) -> None:
        await until(lambda: f"receipt-id:{receipt}\n".encode() in sent(name))

    consumer, producer = client("consumer"), client("producer")
    consumer(frame("SUBSCRIBE", destination="/queue/a", id="s1", ack="client-individual"))
    consumer(frame("SUBSCRIBE", destination="/topic/t", id="s2", receipt="sub"))
    await receipted("consumer", "sub")
    producer(frame("SEND", "one", destination="/queue/a", message_id="m1", receipt="r1"))
    producer(frame("SEND", "two", destination="/queue/a", message_id="m2", receipt="r2", x="y"))
    producer(frame("SEND", "again", destination="/queue/a", message_id="m1", receipt="r1b"))
    producer(frame("SEND", "news", destination="/topic/t", message_id="n1", receipt="r3"))
    producer(frame("BEGIN", transaction="t1"))
    producer(frame("SEND", "three", destination="/queue/a", message_id="m3", transaction="t1"))
    producer(frame("COMMIT", transaction="t1", receipt="r4"))
    producer(frame("BEGIN", transaction="t2"))
    producer(frame("SEND", "never", destination="/queue/a", message_id="m4", transaction="t2"))
    producer(frame("ABORT", transaction="t2", receipt="r5"))
    await receipted("producer", "r5")
    await until(lambda: sent("consumer").count(b"MESSAGE\n") == 4)
    acks = re.findall(rb"\nack:([^\n]*)\n", sent("consumer"))
    consumer(frame("ACK", id=acks[0].decode(), receipt="a1"))
    consumer(frame("NACK", id=acks[1].decode(), receipt="n1"))
    await until(lambda: sent("consumer").count(b"MESSAGE\n") == 5)  # the NACKed one again
    consumer(frame("UNSUBSCRIBE", id="s1", receipt="u1"))
    consumer(frame("DISCONNECT", receipt="bye"))
    await receipted("consumer", "bye")
    old = client("stomp 1.0", "1.0")
    old(frame("SUBSCRIBE", destination="/queue/b", receipt="o1"))
    old(frame("UNSUBSCRIBE", destination="/queue/b", receipt="o2"))
    old(frame("NACK", id="x", receipt="o3"))  # no NACK in STOMP 1.0: an ERROR
    producer(frame("SEND", "where to?", receipt="r6"))  # no destination: an ERROR
    stranger = client("stranger")
    stranger(frame("FLY", receipt="f1"))
    for name in ("stomp 1.0", "producer", "stranger"):
        await until(lambda name=name: clients[name][1].closed)
    return {name: sent(name).decode("utf-8", "replace") for name in clients}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="primacy-parity-") as root:
        lease = Lease(PosixShare(Path(root)), "parity")
        assert lease.try_acquire()
        config = StoreConfig(share=Path(root), node_id="parity", sync_policy=SyncPolicy.SYNC)
        store = JournalStore.open(config, epoch=lease.claim_epoch(), fencing_check=lease.revalidate)
        try:
            said = asyncio.run(conversation(store))
        finally:
            store.close()
            lease.release()
    json.dump(said, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
