"""ActiveMQ's own Java JMS client (OpenWire, a failover URL) as its users run it.

``JmsFailover.java`` is compiled at run time against the jars of Debian's
activemq package; ``send`` runs it in the background and records, for every
send the broker acknowledged, when it was read and which broker the connection
was on (a failover changes it).
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.activemq.config import ACTIVEMQ_HOME
from primacy.cli.localgroup import wait_until

JMS_SOURCE = Path(__file__).with_name("JmsFailover.java")
# The failover URL options the operator guide's warm recipe gives: reconnect after 100 ms,
# and never back off past a second (ActiveMQ's default is 30 s).
RECIPE_OPTIONS = "initialReconnectDelay=100&maxReconnectDelay=1000"


def failover_url(ports: list[int], options: str = RECIPE_OPTIONS) -> str:
    addresses = ",".join(f"tcp://127.0.0.1:{port}" for port in ports)
    return f"failover:({addresses})" + (f"?{options}" if options else "")


@dataclass(frozen=True)
class Sent:
    body: str
    broker: str  # the broker the connection was on when the send was acknowledged
    at: float  # time.monotonic() when its line was read


class JmsClient:
    """One sender (``send``, in the background) and ``receive`` (every message, at the end)."""

    def __init__(self, classes: Path, url: str, jvm_options: tuple[str, ...] = ()) -> None:
        subprocess.run(
            ["javac", "-cp", f"{ACTIVEMQ_HOME}/lib/*", "-d", str(classes), str(JMS_SOURCE)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        self._java = [
            "java",
            *jvm_options,
            "-cp",
            f"{classes}:{ACTIVEMQ_HOME}/lib/*",
            "JmsFailover",
        ]
        self.url = url
        self.acknowledged: list[Sent] = []
        self._sender: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def sent(self) -> list[str]:
        """The bodies the broker acknowledged, in order."""
        return [sent.body for sent in list(self.acknowledged)]

    def send(self, count: int, pause_ms: int) -> None:
        self._sender = subprocess.Popen(
            [*self._java, "send", self.url, str(count), str(pause_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, args=(self._sender,), daemon=True)
        self._reader.start()

    def _read(self, sender: subprocess.Popen[str]) -> None:
        assert sender.stdout is not None
        for line in sender.stdout:
            if line.startswith("sent "):
                _, body, broker = line.split()
                self.acknowledged.append(Sent(body, broker, time.monotonic()))

    def wait_sent(self, count: int, timeout_s: float) -> None:
        wait_until(
            lambda: len(self.acknowledged) >= count, timeout_s, f"{count} acknowledged sends"
        )

    def first_on_another_broker(self, since: float, timeout_s: float) -> Sent:
        """The first send acknowledged after ``since`` by a broker other than the one the
        connection was on then: the client's outage ends there."""
        before = [sent for sent in self.acknowledged if sent.at <= since]
        old = before[-1].broker if before else None
        found: list[Sent] = []

        def arrived() -> bool:
            found[:] = [s for s in self.acknowledged if s.at > since and s.broker != old][:1]
            return bool(found)

        wait_until(arrived, timeout_s, "a send acknowledged by another broker")
        return found[0]

    def stop(self) -> None:
        """End the sender where it is: what it had acknowledged is ``sent``."""
        assert self._sender is not None and self._reader is not None
        self._sender.kill()
        self._sender.wait(10)
        self._reader.join(10)

    def receive(self, expected: int | None = None) -> list[str]:
        """Every message until none comes for 10 s, or, with ``expected``, until m0 to
        m<expected - 1> have all come (a test then waits 10 s only for what is missing)."""
        done = subprocess.run(
            [*self._java, "receive", self.url, *([] if expected is None else [str(expected)])],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        return [line.split()[1] for line in done.stdout.splitlines() if line.startswith("got ")]

    def close(self) -> None:
        if self._sender is not None and self._sender.poll() is None:
            self._sender.kill()
            self._sender.wait(10)
