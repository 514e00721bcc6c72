"""A property of the group, tried against real supervisor processes: whatever odd entries appear
in the share while it serves and fails over (files, directories, FIFOs and symlinks, with random
names and contents, next to every kind of file primacy keeps), every trial ends with a master
serving, and no acknowledged message is lost or stored twice.

Besides random bytes it plants what passes the first checks (issue 27): JSON with numbers no
node writes (1e999, 10**30, NaN) in every JSON file primacy reads, CRC-valid checkpoints holding
them, and segments of unclaimed epochs with valid headers.

The planter only adds entries, never replaces one of ours: overwriting a real segment loses its
messages whatever the software does. Two names are left out on purpose: the pause marker (a file
any node may write to pause the group, so planting it pauses the group, as documented) and
epochs near 2^63 (an epoch past which none can be claimed; the group then refuses to go on
rather than reuse an epoch). The seed is printed; PRIMACY_PLANT_SEED replays a run.
"""

from __future__ import annotations

import os
import random
import signal
import string
from pathlib import Path

import pytest

from primacy.client.consumer import Consumer
from primacy.client.producer import Producer
from primacy.share.port import latest_epoch
from primacy.share.posix import PosixShare
from primacy.store.checkpoint import checkpoint_name
from primacy.store.segments import segment_name
from tests.harness.crafted_files import plant_random
from tests.harness.group import Group, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow

TRIALS = 6
PLANTED_PER_TRIAL = 12
CRAFTED_PER_TRIAL = 2
DIRECTORIES = ("", "epochs", "nodes", "journal", "journal/checkpoints")


def _name(rng: random.Random, directory: str, next_epoch: int) -> str:
    near = next_epoch + rng.randint(0, 2)
    choices = {
        "": [".primacy.lock.1.tmp", "switchover.json.tmp", "x" * rng.randint(1, 200)],
        "epochs": [
            str(near),
            str(rng.randint(0, 10**15)),
            "²",
            f"00{near}",
            "-1",
            f".{near}.{rng.randint(1, 99999)}.tmp",
        ],
        "nodes": [f"{_word(rng)}.json", f".{_word(rng)}.json.tmp", "aaa.json"],
        "journal": [
            segment_name(near, rng.randint(1, 10**6)),
            segment_name(rng.randint(1, 10**12), rng.randint(1, 10**15)),
            f"{near}-1.seg",
        ],
        "journal/checkpoints": [
            checkpoint_name(rng.randint(1, 10**9), near),
            checkpoint_name(10**15, rng.randint(1, 10**6)),
        ],
    }[directory]
    return rng.choice([*choices, _word(rng)])


def _word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits + "._-", k=rng.randint(1, 24)))


def _plant(rng: random.Random, path: Path) -> str:
    """Create one odd entry at ``path`` (never replacing one); what was planted."""
    kind = rng.choice(["file", "json", "empty", "directory", "fifo", "symlink"])
    try:
        if kind == "directory":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "symlink":
            target = rng.choice(["/etc/passwd", "/dev/zero", str(path.parent), "/nonexistent"])
            os.symlink(target, path)
        else:
            content = {
                "file": rng.randbytes(rng.randint(1, 8192)),
                "json": rng.choice(
                    [b"{}", b"[" * 50_000, b'{"role": "master"}', b"null", *_NUMBERS]
                ),
                "empty": b"",
            }[kind]
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
    except FileExistsError:
        return "nothing (the name was taken)"
    return f"{kind} {path}"


# JSON with numbers no node writes, in the fields nodes read (issue 27): past a float, past a
# u64, NaN and the infinities Python's reader accepts.
_NUMBERS = [
    (
        f'{{"epoch": {n}, "node_id": "x", "host": "h", "pid": {n}, "http": "h:1", '
        f'"priority": "normal", "role": "master", "updated_unix_s": {n}, "since_unix_s": {n}, '
        f'"claimed_unix_s": {n}, "lock_keep_alive_period_ms": {n}, "outlasted": {n}, '
        f'"from_node": "x", "to_node": "x", "until_unix_s": {n}}}'
    ).encode()
    for n in ("1e999", "-1e999", "NaN", "Infinity", str(10**30), str(2**64), "-1")
]


def _serving(nodes: dict[str, NodeProcess]) -> NodeProcess | None:
    masters = [node for node in nodes.values() if node.alive() and node.is_master()]
    return masters[0] if len(masters) == 1 else None


def test_random_entries_in_a_live_share_never_cost_a_master_or_a_message(
    group: Group, share: Path
) -> None:
    seed = int(os.environ.get("PRIMACY_PLANT_SEED", random.randrange(2**32)))
    print(f"\nPRIMACY_PLANT_SEED={seed}")
    rng = random.Random(seed)
    ports = {name: free_port() for name in ("a", "b")}

    def start(name: str) -> NodeProcess:
        # A keepalive that a loaded test machine does not lapse: a master that demotes
        # because its own lease check was starved of CPU says nothing of what was planted.
        return group.start(
            name, "--stomp", f"127.0.0.1:{ports[name]}", "--lock-keep-alive-period-ms", "1000"
        )

    nodes = {name: start(name) for name in ports}
    wait_until(lambda: _serving(nodes) is not None, 30, "a first master")
    url = (
        "failover:("
        + ",".join(f"tcp://127.0.0.1:{port}" for port in ports.values())
        + ")?initialReconnectDelay=20&maxReconnectDelay=500&randomize=false&timeout=60000"
    )
    producer = Producer(url)
    acknowledged: list[str] = []
    planted: list[str] = []
    try:
        for trial in range(TRIALS):
            acknowledged += [producer.send("/queue/q", f"t{trial}-{n}".encode()) for n in range(5)]
            next_epoch = latest_epoch(PosixShare(share)) + 1
            for _ in range(PLANTED_PER_TRIAL):
                directory = rng.choice(DIRECTORIES)
                (share / directory).mkdir(parents=True, exist_ok=True)
                planted.append(_plant(rng, share / directory / _name(rng, directory, next_epoch)))
            # Crafted to pass the first checks: a CRC-valid checkpoint with such a number, a
            # far-epoch segment with a valid header (tests/harness/crafted_files.py).
            planted += [plant_random(share, rng, next_epoch) for _ in range(CRAFTED_PER_TRIAL)]
            master = _serving(nodes)
            assert master is not None, f"no master after planting: {planted[-14:]}"
            master.signal(rng.choice([signal.SIGKILL, signal.SIGTERM]))
            master.process.wait(30)
            nodes[master.node_id] = start(master.node_id)
            wait_until(
                lambda: _serving(nodes) is not None,
                60,
                f"a master after trial {trial} (seed {seed}), planted: {planted[-14:]}",
            )
            acknowledged += [producer.send("/queue/q", f"t{trial}-after".encode())]
    finally:
        producer.close()

    consumer = Consumer(url, "/queue/q")
    received: list[str] = []
    while (message := consumer.receive(timeout_s=3.0)) is not None:
        received.append(message.message_id)
        assert consumer.ack(message)
    consumer.close()
    assert sorted(set(acknowledged) - set(received)) == [], f"lost (seed {seed})"
    assert len(received) == len(set(received)), f"delivered twice (seed {seed})"
    for node in group.every_process:
        log = node.log()
        assert "Traceback" not in log and "PRIMACY-1097" not in log, f"{node.node_id}: {log}"
