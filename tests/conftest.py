"""Fixtures shared by every test folder."""

from __future__ import annotations

import compileall
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from primacy.share.zookeeper import ZooKeeperShare
from tests.broker.nodes import Masters
from tests.harness.emulated_hosts import EmulatedHosts, fuse_unavailable_reason
from tests.harness.failure_logs import attach_log_tails
from tests.harness.ganesha.host import RealNfsHosts
from tests.harness.ganesha.server import GaneshaServer, real_nfs_unavailable_reason
from tests.harness.group import Group
from tests.harness.zookeeper import Ensemble, running_ensemble
from tests.harness.zookeeper import unavailable_reason as zookeeper_unavailable_reason
from tests.packages import PACKAGES, ROOT
from tests.share.ports import KINDS, Handles, handles_for, kind_params, zookeeper_handles

# What each unit of work took in a whole run (``--durations=0``, summed per unit; taken
# 2026-11-28 on the shared 2-core machine, loaded). Only the order is read from it: a unit not
# in it (a new file) is placed by its markers. Refresh it when the order looks stale.
UNIT_DURATIONS = Path(__file__).with_name("unit_durations.json")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the sources once, in the run's first process (not on each xdist worker).

    Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine sets it for everyone) no process
    writes ``__pycache__``, and each of the suite's hundreds of ``primacy`` processes
    compiled the same 130 modules from source again: a tenth of a start's CPU. Python reads
    caches it was told not to write, and checks each against its source, so an edited file
    is never run stale."""
    if hasattr(session.config, "workerinput"):
        return
    for folder in (*PACKAGES, "tests"):
        compileall.compile_dir(ROOT / folder, quiet=2)


def pytest_configure(config: pytest.Config) -> None:
    """pytest keeps each test module it rewrote (assertions) in ``__pycache__`` only where
    bytecode may be written: under ``PYTHONDONTWRITEBYTECODE`` every xdist worker rewrote
    and compiled every test module again, at each run (collecting the suite: 9 s of CPU,
    4 s with the cache, per worker). Writing them changes what runs in no way: each is
    checked against its source, and written whole or not at all."""
    sys.dont_write_bytecode = False


def _folder_first(arg: str, invocation_dir: Path) -> tuple[str, ...]:
    """A command-line argument's path as parts (``tests/api/test_x.py::test_y`` ->
    ``(…, "tests", "api", "test_x.py")``): sorted, every folder's arguments come together."""
    return (invocation_dir / arg.split("::", 1)[0]).resolve().parts


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """The files given on the command line, one folder's together: pytest 9.1 loses a folder's
    conftest fixtures for the files given after a file of another folder came between them
    (``-n 0 tests/api/test_metrics.py tests/test_x.py tests/api/test_status_snapshot.py``:
    "fixture 'master_snapshot' not found" for the last, which passes alone;
    pytest-dev/pytest#14971, #14997). The order tests run in is pytest_collection_modifyitems'
    (below), whatever the order of the arguments."""
    where = session.config.invocation_params.dir
    session.config.args.sort(key=lambda arg: _folder_first(arg, where))


def _unit(item: pytest.Item, zookeeper_files: set[Path]) -> str:
    if item.get_closest_marker("spark"):
        return "spark"
    if item.path in zookeeper_files:
        return "zookeeper"
    return item.nodeid.split("::")[0]


def _uses_the_session_ensemble(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return "zookeeper_ensemble" in names or (
        "handles" in names and item.get_closest_marker("zookeeper") is not None
    )


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each file one unit of work, every Spark test in one, and every file that uses the
    session's ZooKeeper ensemble in one: with ``--dist loadgroup`` (pyproject.toml) a unit
    runs on one worker, so a module's nodes start once, one worker pays for a Spark session
    (a JVM) and the shared CLI replay, and one, not each, starts three ZooKeeper servers.

    The longest units first (UNIT_DURATIONS): the workers take them in this order, and a
    long one taken last is the tail of the whole run. A unit it does not know goes by its
    markers: Spark, then files with a real-process (``slow``) test, then the rest."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    zookeeper_files = {item.path for item in items if _uses_the_session_ensemble(item)}
    known: dict[str, float] = json.loads(UNIT_DURATIONS.read_text())
    guessed = {"spark": 300.0}  # a new Spark file joins the longest unit
    units = {item.nodeid: _unit(item, zookeeper_files) for item in items}

    def seconds(item: pytest.Item) -> float:
        unit = units[item.nodeid]
        return known.get(unit, guessed.get(unit, 5.0 if item.path in slow_files else 0.5))

    items.sort(key=lambda item: (-seconds(item), units[item.nodeid]))  # stable within a unit
    for item in items:
        item.add_marker(pytest.mark.xdist_group(units[item.nodeid]))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's process logs in its report (tests/harness/failure_logs.py)."""
    report = yield
    attach_log_tails(item, report)
    return report


@pytest.fixture
def share(tmp_path: Path) -> Path:
    directory = tmp_path / "share"
    directory.mkdir()
    return directory


@pytest.fixture(params=kind_params(KINDS))
def share_kind(request: pytest.FixtureRequest) -> str:
    """Each implementation of the share port in turn (tests/share/ports.py)."""
    return str(request.param)


@pytest.fixture
def handles(share_kind: str, share: Path, request: pytest.FixtureRequest) -> Iterator[Handles]:
    """Handles on one share of ``share_kind``: each call is another node's. ZooKeeper's are
    on the session's ensemble, under a path of this test's own."""
    if share_kind != "zookeeper":
        yield handles_for(share_kind, share)
        return
    ensemble: Ensemble = request.getfixturevalue("zookeeper_ensemble")
    opened: list[ZooKeeperShare] = []
    try:
        yield zookeeper_handles(
            ensemble.hosts, f"/test-{uuid.uuid4().hex}", opened, ensemble.access
        )
    finally:
        for port in opened:
            port.close()


@pytest.fixture(scope="session")
def zookeeper_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    """Three ZooKeeper servers on loopback (tests/harness/zookeeper.py), one per test session
    and worker; tests that kill servers start their own. Skips, saying why, only where java
    or Debian's zookeeper package is missing."""
    reason = zookeeper_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with running_ensemble(tmp_path_factory.mktemp("zookeeper")) as ensemble:
        yield ensemble


@pytest.fixture
def group(share: Path, tmp_path: Path) -> Iterator[Group]:
    """A group of real supervisor processes; every one is killed by pid at the end."""
    logs = tmp_path / "logs"
    logs.mkdir()
    started = Group(share=share, log_dir=logs)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def emulated_hosts(tmp_path: Path) -> Iterator[EmulatedHosts]:
    """``emulated_hosts(n, lease_s=1.0)`` starts n emulated NFS hosts (tests/harness/nfsemu);
    all are stopped at the end, by pid. Skips, saying why, only without root or /dev/fuse."""
    reason = fuse_unavailable_reason()
    if reason:
        pytest.skip(reason)
    hosts = EmulatedHosts(tmp_path / "nfsemu")
    try:
        yield hosts
    finally:
        hosts.close()


@pytest.fixture
def real_nfs(tmp_path: Path) -> Iterator[RealNfsHosts]:
    """``real_nfs(n)`` starts n hosts on a real NFSv4 server (tests/harness/ganesha): nfs-ganesha
    in its own network namespace, lease 4 s, graceless; each host a libnfs client behind a
    link it can cut. ``real_nfs.server`` restarts it. Everything is stopped by pid at the end.
    Skips, saying why, only without root, /dev/fuse, network namespaces or the packages."""
    reason = real_nfs_unavailable_reason()
    if reason:
        pytest.skip(reason)
    server = GaneshaServer.start(tmp_path / "nfsreal")
    hosts = RealNfsHosts(tmp_path / "nfsreal", server)
    try:
        yield hosts
    finally:
        hosts.close()
        server.close()


@pytest.fixture
def masters(tmp_path: Path) -> Iterator[Masters]:
    """In-process masters on a temporary share (tests/broker/nodes.py), for the broker, client
    and interop tests."""
    share = tmp_path / "share"
    share.mkdir()
    started = Masters(share)
    try:
        yield started
    finally:
        started.close()
