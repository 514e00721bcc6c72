"""The production install: the wheel into a fresh prefix as root, its units, nodes as ``primacy``.

docs/operator-guide.md, "Installing on a host", on one machine: a folder of wheels (primacy's
and its dependencies', made here without the network: tests/install/wheelhouse.py), a fresh
``python3 -m venv`` as the prefix (the machine's python3 from the standard PATH, which the
service user can run), ``pip install --no-index --find-links`` into it as root,
``primacy systemd install`` from that prefix, then three nodes, each started as its unit
would start it (the unit's ``ExecStart=``, ``User=``, ``UMask=``), on a share the service
user owns: one becomes master, the other two wait as slaves.

The wheel is pure Python (``PRIMACY_COMPILE=0``): compiling the hot path with mypyc takes
about 50 s on two cores, against 10 s, and what is tested here (the package data, the
scripts, the units, the permissions) is the same in both wheels; tests/compiled/ covers the
compiled build. ``PRIMACY_TEST_WHEELHOUSE=DIR`` installs from a wheelhouse made elsewhere
instead (the guide's step 1). What this cannot do is start the units under systemd (no
systemd runs in the test's container): ``systemd-analyze verify`` checks the installed units
where it is present.

The service user is ``primacy``; where there is none, the test creates it as the guide does
(``useradd --system``, without the guide's fixed ids, which may be taken here) and removes it
at the end.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from primacy.cli.localgroup import free_port, http_status, wait_until
from tests.install.wheelhouse import offline_wheelhouse

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="installs into a prefix as root and runs nodes as another user: needs root "
        "(CI runs as root)",
    ),
]

SERVICE_USER = "primacy"
STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SERVICES = ("primacy@.service", "primacy-exec@.service", "primacy-replay@.service")
NODES = ("node-a", "node-b", "node-c")


@dataclass(frozen=True)
class Host:
    """A host's root in a temporary directory: ``opt/primacy``, ``etc``, ``srv/primacy``."""

    root: Path

    @property
    def prefix(self) -> Path:
        return self.root / "opt" / "primacy"

    @property
    def primacy(self) -> Path:
        return self.prefix / "bin" / "primacy"

    @property
    def unit_dir(self) -> Path:
        return self.root / "etc" / "systemd" / "system"

    @property
    def share(self) -> Path:
        return self.root / "srv" / "primacy" / "orders"


def _run(*argv: str | Path, env: dict[str, str] | None = None) -> str:
    """A command as root with root's usual umask (022); its output, or a failure with it."""
    run = subprocess.run(
        [str(arg) for arg in argv],
        env={"PATH": STANDARD_PATH, "LANG": "C.UTF-8", **(env or {})},
        umask=0o022,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, f"{shlex.join(map(str, argv))}:\n{run.stdout}{run.stderr}"
    return run.stdout


@pytest.fixture(scope="module")
def service_user() -> Iterator[pwd.struct_passwd]:
    """``primacy``; created as the guide creates it if the machine has none, and then removed
    again: a ``primacy`` account changes what the doctor run as root checks the share for."""
    try:
        existing: pwd.struct_passwd | None = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        existing = None
    if existing is not None:
        yield existing
        return
    # The guide's useradd, without its fixed ids, which another account may hold here
    _run(
        *("useradd", "--system", "--user-group", "--home-dir", "/nonexistent"),
        *("--shell", "/usr/sbin/nologin", SERVICE_USER),
    )
    try:
        yield pwd.getpwnam(SERVICE_USER)
    finally:
        _run("userdel", SERVICE_USER)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """primacy installed from a wheelhouse into a fresh prefix, as the guide installs it."""
    given = os.environ.get("PRIMACY_TEST_WHEELHOUSE")  # the guide's step 1, say: compiled
    if given:
        wheelhouse = Path(given)
    else:
        work = tmp_path_factory.mktemp("build")
        wheelhouse = offline_wheelhouse(work / "wheelhouse", work, PRIMACY_COMPILE="0")
    # Not under pytest's temporary folder, which only root may enter.
    root = Path(tempfile.mkdtemp(prefix="primacy-host-"))
    root.chmod(0o755)
    host = Host(root)
    try:
        python3 = shutil.which("python3", path=STANDARD_PATH)
        assert python3 is not None, "no python3 on the standard PATH (.ci/setup needs one)"
        _run(python3, "-m", "venv", host.prefix)
        # PIP_CONFIG_FILE: no index or find-links of this machine's pip configuration helps.
        _run(
            *(host.prefix / "bin" / "pip", "install", "--no-index", "--find-links", wheelhouse),
            "primacy",
            env={"PIP_CONFIG_FILE": os.devnull},
        )
        yield host
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def units(host: Host) -> str:
    """``primacy systemd install`` run from the prefix; its output."""
    return _run(host.primacy, "systemd", "install", "--prefix", host.root)


def _exec_start(unit: Path) -> str:
    (line,) = (x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return line.removeprefix("ExecStart=")


def test_systemd_install_from_the_prefix_writes_units_that_run_its_binary(
    host: Host, units: str
) -> None:
    for service in SERVICES:
        unit = host.unit_dir / service
        assert _exec_start(unit).startswith(f"{host.primacy} "), unit.read_text()
        assert f"\nUser={SERVICE_USER}\n" in unit.read_text()
    assert (host.unit_dir / "primacy-replay@.timer").is_file()
    assert (host.root / "etc/default/primacy").is_file()
    assert (host.root / "etc/primacy/example-group.toml").is_file()
    assert f"the units run {host.primacy} as the user {SERVICE_USER}" in units
    # The ActiveMQ gate's source, for the guide's javac line
    gate = host.prefix.glob("lib/python3*/site-packages/primacy/supervisor/child/activemq/*")
    assert [path.name for path in gate] == ["PrimacyGateLocker.java"]
    if (analyze := shutil.which("systemd-analyze")) is not None:
        instances = [str(host.unit_dir / s.replace("@.", "@orders.")) for s in SERVICES]
        _run(analyze, "verify", "--man=no", *instances)


def _node_config(host: Host, node: str, http_port: int, stomp_port: int) -> Path:
    """The installed example, edited as the guide says (node_id, share), with loopback
    ports: three nodes on one machine cannot all listen on 0.0.0.0:8008."""
    lines = (host.root / "etc/primacy/example-group.toml").read_text().splitlines()
    edits = {
        'node_id = "node-a"': f'node_id = "{node}"',
        'share = "/srv/primacy/GROUP"': f'share = "{host.share}"',
        'http = "0.0.0.0:8008"': f'http = "127.0.0.1:{http_port}"',
        'stomp = "0.0.0.0:61613"': f'stomp = "127.0.0.1:{stomp_port}"',
    }
    for old, new in edits.items():
        assert lines.count(old) == 1, f"the example config no longer has the line {old!r}"
        lines[lines.index(old)] = new
    config = host.root / f"etc/primacy/orders-{node}.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


def _unit_command(host: Host, config: Path) -> list[str]:
    """primacy@orders.service's ExecStart=, with this node's config and no PRIMACY_RUN_ARGS
    (/etc/default/primacy leaves it empty)."""
    command = _exec_start(host.unit_dir / "primacy@.service")
    command = command.replace("/etc/primacy/%i.toml", str(config))
    return [word for word in shlex.split(command) if word != "$PRIMACY_RUN_ARGS"]


def _role(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=1) as answer:
            return str(json.load(answer)["role"])
    except (OSError, ValueError, KeyError):
        return None


def test_three_nodes_from_the_prefix_run_as_the_service_user_one_master(
    host: Host, units: str, service_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    user = service_user
    host.share.mkdir(parents=True)
    os.chown(host.share, user.pw_uid, user.pw_gid)  # the guide's chown, once
    # The guide's check as the service user: exit 0 is the go-ahead (1 would be warnings only,
    # which a test machine's filesystem may have; 2 refuses)
    doctor = subprocess.run(
        ["runuser", "-u", SERVICE_USER, "--", str(host.primacy), "doctor", str(host.share)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert doctor.returncode in (0, 1), doctor.stdout + doctor.stderr
    ports = {node: (free_port(), free_port()) for node in NODES}
    nodes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for node, (http_port, stomp_port) in ports.items():
            config = _node_config(host, node, http_port, stomp_port)
            with open(tmp_path / f"{node}.log", "wb") as log:
                nodes[node] = subprocess.Popen(
                    _unit_command(host, config),
                    user=user.pw_uid,  # User=, Group=, UMask= of the unit
                    group=user.pw_gid,
                    extra_groups=[],
                    umask=0o027,
                    cwd="/",
                    env={"PATH": STANDARD_PATH, "LANG": "C.UTF-8", "HOME": user.pw_dir},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )

        def one_master_two_slaves() -> bool:
            roles = sorted(str(_role(http_port)) for http_port, _ in ports.values())
            return roles == ["master", "slave", "slave"]

        try:
            wait_until(one_master_two_slaves, 60, "one master and two slaves", interval_s=0.2)
        except AssertionError:
            logs = {node: (tmp_path / f"{node}.log").read_text()[-2000:] for node in NODES}
            raise AssertionError(json.dumps(logs, indent=1)) from None
        masters = [node for node, (port, _) in ports.items() if http_status(port, "/master") == 200]
        assert len(masters) == 1
        for node, process in nodes.items():
            assert process.poll() is None, node
            proc = Path(f"/proc/{process.pid}")
            assert proc.stat().st_uid == user.pw_uid
            # The prefix's interpreter runs the prefix's script, not the checkout's code.
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            assert argv[0].startswith(bytes(host.prefix / "bin/python")), argv
            assert argv[1] == bytes(host.primacy), argv
        status = _run(host.primacy, "status", "--share", host.share)
        assert all(node in status for node in NODES), status
        owners = {path.stat().st_uid for path in host.share.rglob("*")}
        assert owners == {user.pw_uid}
    finally:
        for process in nodes.values():
            process.send_signal(signal.SIGTERM)
        for process in nodes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
