"""Every thread of a node survives load from every side at once, or fails the node loudly.

The role loop owns the node's state; the HTTP server, the config watcher, the
registry and the lock I/O worker only post events and read snapshots. Hammered
together while the group fails over, none of them may raise; and a thread
that does die must stop its node with a logged code, never vanish silently.
"""

from __future__ import annotations

import http.client
import signal
import threading
from pathlib import Path

import pytest

from primacy.supervisor.config import NodeConfig
from primacy.supervisor.shell.node import Node
from tests.harness.group import Group, NodeProcess, free_port, wait_until

THREAD_FAILURE_CODES = ("PRIMACY-1097", "PRIMACY-1098", "PRIMACY-1099", "Traceback")
PATHS = ("/status", "/master", "/slave", "/metrics", "/cluster", "/health", "/readiness")


def _hammer_http(nodes: list[NodeProcess], stop: threading.Event, answers: list[int]) -> None:
    while not stop.is_set():
        for node in nodes:
            for path in PATHS:
                connection = http.client.HTTPConnection("127.0.0.1", node.port, timeout=2)
                try:
                    connection.request("GET", path)
                    answers.append(connection.getresponse().status)
                except OSError:
                    pass  # a node being killed and restarted
                finally:
                    connection.close()


def _edit_configs(configs: list[Path], stop: threading.Event, edits: list[int]) -> None:
    priorities = ("normal", "high")
    keep_alives = (250, 300)
    while not stop.is_set():
        index = len(edits)
        for config in configs:
            config.write_text(
                f'priority = "{priorities[index % 2]}"\n'
                f"lock_keep_alive_period_ms = {keep_alives[index % 2]}\n"
            )
        edits.append(index)
        stop.wait(0.4)  # longer than the watcher's quiet period, so each edit is applied


@pytest.mark.slow
def test_http_and_config_edits_during_failovers_raise_in_no_thread(
    group: Group, tmp_path: Path
) -> None:
    configs = [tmp_path / f"{name}.toml" for name in ("n1", "n2")]
    for config in configs:
        config.write_text('priority = "normal"\n')
    nodes = {
        name: group.start(name, "--config", str(config), "--stomp", f"127.0.0.1:{free_port()}")
        for name, config in zip(("n1", "n2"), configs, strict=True)
    }
    for node in nodes.values():
        wait_until(lambda node=node: node.status("/readiness") == 200, 20, f"{node.node_id}")
    stop = threading.Event()
    answers: list[int] = []
    edits: list[int] = []
    workers = [
        threading.Thread(target=_hammer_http, args=(list(nodes.values()), stop, answers)),
        threading.Thread(target=_edit_configs, args=(configs, stop, edits)),
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in range(3):
            master = group.wait_for_master(timeout_s=20)
            master.signal(signal.SIGKILL)
            master.process.wait(10)
            group.wait_for_master(timeout_s=20)
            restarted = group.start(
                master.node_id,
                "--config",
                str(tmp_path / f"{master.node_id}.toml"),
                "--stomp",
                f"127.0.0.1:{free_port()}",
            )
            nodes[master.node_id] = restarted
            wait_until(lambda node=restarted: node.status("/slave") == 200, 20, "a new slave")
        # A graceful handover too: the release path runs while everything else is busy.
        master = group.wait_for_master(timeout_s=20)
        master.signal(signal.SIGTERM)
        assert master.process.wait(20) == 0
        group.wait_for_master(timeout_s=20)
        for node in group.alive():
            wait_until(
                lambda node=node: "applied the edited config" in node.log(),
                20,
                f"{node.node_id} to apply an edit under load",
            )
    finally:
        stop.set()
        for worker in workers:
            worker.join(10)
    assert answers.count(200) > 0 and len(edits) > 3
    for log_file in sorted((tmp_path / "logs").glob("*.log")):
        text = log_file.read_text(errors="replace")
        for code in THREAD_FAILURE_CODES:
            assert code not in text, f"{log_file.name}: {code}\n{text[-3000:]}"


def test_a_thread_that_dies_stops_its_node_with_a_code(
    share: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = Node(
        NodeConfig(node_id="n1", share=share, http=f"127.0.0.1:{free_port()}", priority="never")
    )
    exit_codes: list[int] = []
    runner = threading.Thread(target=lambda: exit_codes.append(node.run()), name="test-role-loop")
    runner.start()
    try:
        wait_until(lambda: node.snapshot().role == "slave", 10, "the node to start")

        def broken() -> None:
            raise RuntimeError("a bug in a worker")

        # One of the node's own threads (every thread a node starts runs through its
        # ThreadDeaths, supervisor/shell/thread_deaths.py): no process-wide hook is involved.
        doomed = node._parts.deaths.thread(broken, "primacy-doomed")
        doomed.start()
        doomed.join()
        runner.join(15)
    finally:
        if runner.is_alive():
            node.request_stop("test over")
            runner.join(15)
    assert exit_codes == [1]
    assert node.snapshot().role == "stopped"
    messages = [record.getMessage() for record in caplog.records]
    assert any("PRIMACY-1097" in m and "primacy-doomed" in m for m in messages), messages
    # Nothing of the node's is left running: it joined its threads on the way out.
    assert not [t.name for t in threading.enumerate() if t.name.startswith("primacy-")]
