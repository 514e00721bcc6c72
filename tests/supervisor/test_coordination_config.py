"""coordination = "zookeeper" in the config: what it needs, what it refuses, the port it opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from primacy.share.posix import PosixShare
from primacy.share.zookeeper import ZooKeeperShare
from primacy.supervisor.config import ConfigError, load_config
from primacy.supervisor.shell.coordination import open_share_port

ZOOKEEPER = {"coordination": "zookeeper", "zookeeper_hosts": "zk1:2181,zk2:2181,zk3:2181"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"coordination": "zookeeper"}, 'coordination = "zookeeper" needs zookeeper_hosts'),
        ({"zookeeper_hosts": "zk1:2181"}, 'zookeeper_hosts is set but coordination is "share"'),
        ({**ZOOKEEPER, "zookeeper_hosts": "zk1:2181,zk2"}, "'zk2' is not HOST:PORT"),
        ({**ZOOKEEPER, "zookeeper_hosts": "zk1:2181/chroot"}, "the group's path goes in"),
        ({**ZOOKEEPER, "zookeeper_path": "primacy"}, "bad value for 'zookeeper_path'"),
        ({**ZOOKEEPER, "zookeeper_path": "/zookeeper/x"}, "not under /zookeeper"),
        ({**ZOOKEEPER, "zookeeper_path": "/a/../b"}, "bad value for 'zookeeper_path'"),
        (
            {**ZOOKEEPER, "zookeeper_session_timeout_ms": 2000, "lock_keep_alive_period_ms": 2000},
            "zookeeper_session_timeout_ms (2000) must be at least lock_keep_alive_period_ms",
        ),
        ({**ZOOKEEPER, "coordination": "etcd"}, "bad value for 'coordination'"),
        (
            {"zookeeper_credentials_file": "/etc/primacy/zk"},
            'zookeeper_credentials_file is set but coordination is "share"',
        ),
        (
            {**ZOOKEEPER, "zookeeper_credentials_file": "/x", "zookeeper_allow_open_acl": True},
            "zookeeper_allow_open_acl = true and zookeeper_credentials_file contradict",
        ),
        (
            {**ZOOKEEPER, "zookeeper_tls_ca_file": "/ca", "zookeeper_tls_cert_file": "/c"},
            "zookeeper_tls_cert_file and zookeeper_tls_key_file go together",
        ),
        (
            {**ZOOKEEPER, "zookeeper_tls_cert_file": "/c", "zookeeper_tls_key_file": "/k"},
            "zookeeper_tls_cert_file needs zookeeper_tls_ca_file",
        ),
        ({**ZOOKEEPER, "zookeeper_allow_open_acl": "yes"}, "zookeeper_allow_open_acl"),
    ],
)
def test_a_bad_coordination_is_refused_naming_the_key(
    tmp_path: Path, values: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(None, {"node_id": "a", "share": tmp_path, **values})


def test_the_node_opens_the_port_its_coordination_names(tmp_path: Path) -> None:
    share = load_config(None, {"node_id": "a", "share": tmp_path})
    assert isinstance(open_share_port(share, lambda state: None), PosixShare)
    config = load_config(
        None, {"node_id": "a", "share": tmp_path, **ZOOKEEPER, "zookeeper_path": "/p/orders"}
    )
    port = open_share_port(config, lambda state: None)
    try:
        assert isinstance(port, ZooKeeperShare)
        assert (port.hosts, port.path) == (ZOOKEEPER["zookeeper_hosts"], "/p/orders")
    finally:
        port.close()


def test_the_cli_reads_the_group_path_a_node_uses_by_default() -> None:
    """status and cluster --zookeeper default to the path a node uses when none is set: the
    CLI keeps its own copy so that it starts without the config layer's pydantic."""
    from primacy.cli.group_records import DEFAULT_ZOOKEEPER_PATH
    from primacy.supervisor.config.coordination_keys import CoordinationKeys

    assert CoordinationKeys.model_fields["zookeeper_path"].default == DEFAULT_ZOOKEEPER_PATH


def _secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("keys", "code", "message"),
    [
        ({}, "PRIMACY-2040", "no zookeeper_credentials_file"),
        ({"zookeeper_credentials_file": "missing"}, "PRIMACY-2041", "does not exist"),
        ({"zookeeper_credentials_file": "readable"}, "PRIMACY-2041", "chmod 600"),
        ({"zookeeper_credentials_file": "malformed"}, "PRIMACY-2041", "one line USER:PASSWORD"),
        ({"zookeeper_tls_ca_file": "missing"}, "PRIMACY-2041", "ZooKeeper TLS CA file"),
    ],
)
def test_a_node_refuses_to_start_without_a_usable_identity(
    tmp_path: Path, keys: dict[str, str], code: str, message: str
) -> None:
    from primacy.cli.zookeeper_access import judge_zookeeper_access

    files = {
        "missing": tmp_path / "missing",
        "readable": _secret(tmp_path / "readable", "primacy:secret\n", 0o644),
        "malformed": _secret(tmp_path / "malformed", "no colon here\n"),
    }
    values = {name: files[value] for name, value in keys.items()}
    if "zookeeper_tls_ca_file" in keys:
        values["zookeeper_credentials_file"] = _secret(tmp_path / "good", "primacy:secret\n")
    config = load_config(None, {"node_id": "a", "share": tmp_path, **ZOOKEEPER, **values})
    refusal = judge_zookeeper_access(config)
    assert refusal is not None and refusal.startswith(code), refusal
    assert message in refusal


def test_open_acls_are_the_operators_explicit_choice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from primacy.cli.zookeeper_access import judge_zookeeper_access

    config = load_config(
        None,
        {"node_id": "a", "share": tmp_path, **ZOOKEEPER, "zookeeper_allow_open_acl": True},
    )
    assert judge_zookeeper_access(config) is None
    assert "PRIMACY-2043" in caplog.text and "PRIMACY-2045" in caplog.text


def test_the_credentials_file_gives_the_port_its_identity(tmp_path: Path) -> None:
    credentials = _secret(tmp_path / "zk", "primacy:s3cret\n")
    config = load_config(
        None,
        {"node_id": "a", "share": tmp_path, **ZOOKEEPER, "zookeeper_credentials_file": credentials},
    )
    port = open_share_port(config, lambda state: None)
    try:
        assert isinstance(port, ZooKeeperShare)
        assert (port.access.user, port.access.password) == ("primacy", "s3cret")
        assert "s3cret" not in repr(port.access)
        assert port.client.default_acl == port.access.acl()
    finally:
        port.close()
