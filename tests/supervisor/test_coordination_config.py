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
