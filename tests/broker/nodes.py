"""A master in-process for broker and client tests: real lease, real journal, real BrokerService."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primacy.broker.config import BrokerConfig
from primacy.broker.frames import Frame, FrameParser, encode
from primacy.broker.service import BrokerService
from primacy.locker.lease import Lease
from primacy.share.posix import PosixShare
from primacy.store.config import StoreConfig
from primacy.store.journal import JournalStore
from primacy.store.recovery import recover


@dataclass
class Master:
    """One epoch of one share: lease, open store, started service."""

    share: Path
    lease: Lease
    store: JournalStore
    service: BrokerService
    fatal: list[str] = field(default_factory=list)

    @property
    def address(self) -> tuple[str, int]:
        return self.service.address

    def stop(self) -> None:
        self.service.stop()
        self.store.close()


class Masters:
    """Start masters on one share; ``failover()`` is a clean in-process takeover."""

    def __init__(self, share: Path) -> None:
        self.share = share
        self.lease = Lease(PosixShare(share), "node-a")
        assert self.lease.try_acquire()
        self.started: list[Master] = []

    def start(
        self,
        config: BrokerConfig | None = None,
        port: int = 0,
        websocket: tuple[str, int] | None = None,
        host: str = "127.0.0.1",
        **store_settings: Any,
    ) -> Master:
        epoch = self.lease.claim_epoch()
        store = JournalStore.open(
            StoreConfig(share=self.share, node_id="node-a", **store_settings),
            epoch=epoch,
            fencing_check=self.lease.revalidate,
        )
        service = BrokerService(store, host, port, config, websocket)
        master = Master(self.share, self.lease, store, service)
        service.on_fatal = master.fatal.append
        service.start()
        self.started.append(master)
        return master

    def failover(self, old: Master, **settings: Any) -> Master:
        """Stop the old master and take over with a new epoch (what a slave does)."""
        old.stop()
        return self.start(**settings)

    def close(self) -> None:
        for master in self.started:
            master.stop()
        self.lease.abandon()


def stored_state(share: Path) -> Any:
    """What a recovery of the share finds now (read-only)."""
    return recover(share / "journal", dedupe_window_messages=100_000, quarantine=False).state


class RawClient:
    """A plain socket speaking frames through our codec, for protocol-level tests."""

    def __init__(self, address: tuple[str, int], timeout_s: float = 5.0) -> None:
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.parser = FrameParser()
        self.frames: list[Frame] = []

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, command: str, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        headers = dict(headers or {})
        if body:
            headers["content-length"] = str(len(body))
        self.sock.sendall(encode(Frame.make(command, headers, body)))

    def connect(self, heart_beat: str = "0,0") -> Frame:
        self.send("CONNECT", {"accept-version": "1.2", "host": "x", "heart-beat": heart_beat})
        return self.read()

    def read(self) -> Frame:
        """The next frame; AssertionError if the connection closes first."""
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError("the broker closed the connection")
            self.frames += self.parser.feed(data)
        return self.frames.pop(0)

    def read_until_closed(self) -> list[Frame]:
        """Every frame until the broker closes the connection."""
        frames = list(self.frames)
        self.frames.clear()
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return frames
            if not data:
                return frames
            frames += self.parser.feed(data)

    def close(self) -> None:
        self.sock.close()


def eventually(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    """Wait for a condition; the timeout only bounds a hang, it asserts nothing about speed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def stored_send_ids(share: Path) -> list[str]:
    """The message id of every valid SEND record in the journal, in order (duplicates kept)."""
    from primacy.store.tools import dump

    ids: list[str] = []
    dump(
        share, lambda record: ids.append(record["message_id"]) if record["type"] == "SEND" else None
    )
    return ids
