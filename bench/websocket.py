"""STOMP over WebSocket against plain STOMP: the same receipted sends through both listeners
of one broker, in alternating rounds, and the ratio of their rates.

Run: ``.venv/bin/python bench/websocket.py [--messages N] [--rounds R] [--policy sync]``.
One BrokerService with both listeners over a JournalStore on a temporary share (a real lease
and epoch). Each round sends N messages of 1 KiB from one client over TCP (a raw socket and
the broker's own codec) and N over WebSocket (the ``websockets`` library's sync client),
keeping ``window`` receipts outstanding (1: each send waits for its receipt; 64: pipelined,
where the per-frame cost shows). Prints messages per second and WebSocket/TCP; asserts
nothing. Absolute rates are noise on a shared machine; the ratio is from the same run.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from websockets.sync.client import connect
from websockets.typing import Subprotocol

from primacy.broker.frames import Frame, FrameParser, encode
from primacy.broker.service import BrokerService
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store.config import StoreConfig, SyncPolicy
from primacy.store.journal import JournalStore

BODY = b"w" * 1024
CONNECT = b"CONNECT\naccept-version:1.2\nhost:x\nheart-beat:0,0\n\n\x00"


def _send_frame(run: str, number: int) -> bytes:
    headers = {
        "destination": "/queue/bench",
        "receipt": str(number),
        "message-id": f"{run}-{number}",
    }
    return encode(Frame.make("SEND", headers, BODY))


def _receipted(
    send: Callable[[bytes], None], receive: Callable[[], int], count: int, window: int
) -> float:
    """Messages per second: ``count`` sends, at most ``window`` receipts outstanding."""
    run = uuid.uuid4().hex[:12]
    started = time.perf_counter()
    sent = received = 0
    while received < count:
        while sent < count and sent - received < window:
            send(_send_frame(run, sent))
            sent += 1
        received += receive()
    return count / (time.perf_counter() - started)


def over_tcp(address: tuple[str, int], count: int, window: int) -> float:
    with socket.create_connection(address) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the WebSocket client
        parser = FrameParser()
        sock.sendall(CONNECT)
        frames: list[Frame] = []
        while not frames:
            frames = parser.feed(sock.recv(65536))

        def receive() -> int:
            while True:
                got = [f for f in parser.feed(sock.recv(65536)) if f.command == "RECEIPT"]
                if got:
                    return len(got)

        return _receipted(sock.sendall, receive, count, window)


def over_websocket(address: tuple[str, int], count: int, window: int) -> float:
    url = f"ws://{address[0]}:{address[1]}/"
    with connect(url, subprotocols=[Subprotocol("v12.stomp")], max_size=None) as ws:
        ws.send(CONNECT.decode())
        ws.recv()

        def receive() -> int:
            reply = ws.recv()
            return 1 if str(reply).startswith("RECEIPT") else 0

        return _receipted(lambda data: ws.send(data.decode()), receive, count, window)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policy", default="sync", choices=[p.value for p in SyncPolicy])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        share = Path(directory)
        lease = Lease(PosixShare(share), "bench")
        assert lease.try_acquire()
        store = JournalStore.open(
            StoreConfig(share=share, node_id="bench", sync_policy=SyncPolicy(args.policy)),
            epoch=lease.claim_epoch(),
            fencing_check=lease.revalidate,
        )
        service = BrokerService(store, "127.0.0.1", 0, websocket=("127.0.0.1", 0))
        service.start()
        assert service.websocket_address is not None
        try:
            print(
                f"{args.messages} receipted 1 KiB sends per round, {args.rounds} rounds, "
                f"sync_policy={args.policy}; median messages/s"
            )
            for window in (1, 64):
                tcp, ws = [], []
                for _ in range(args.rounds):  # alternating, so drift hits both alike
                    tcp.append(over_tcp(service.address, args.messages, window))
                    ws.append(over_websocket(service.websocket_address, args.messages, window))
                t, w = statistics.median(tcp), statistics.median(ws)
                print(
                    f"window {window:3d}: TCP {t:8.0f}  WebSocket {w:8.0f}  "
                    f"WebSocket/TCP {w / t:.2f}"
                )
        finally:
            service.stop()
            store.close()
            lease.abandon()


if __name__ == "__main__":
    main()
