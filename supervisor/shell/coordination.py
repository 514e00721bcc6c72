"""The node's share port, chosen by ``coordination``: the share's own files, or ZooKeeper.

Both keep the journal on the share; only where the lock and the epochs live
differs (docs/operator-guide.md, "Coordination on ZooKeeper"). This module turns the
node's config into a ``GroupLocation``; ``share/factory.py`` builds the port.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from primacy.share.factory import GroupLocation, open_port
from primacy.share.port import SharePort
from primacy.supervisor import codes
from primacy.supervisor.config import NodeConfig

if TYPE_CHECKING:
    from primacy.share.zookeeper_access import ZooKeeperAccess


def zookeeper_access(config: NodeConfig) -> ZooKeeperAccess:
    """The identity and TLS files the config names, read and checked (ZooKeeperAccessError)."""
    from primacy.share.zookeeper_access import load_access

    return load_access(
        config.zookeeper_credentials_file,
        config.zookeeper_tls_ca_file,
        config.zookeeper_tls_cert_file,
        config.zookeeper_tls_key_file,
    )


log = logging.getLogger("primacy.node")


def group_location(config: NodeConfig) -> GroupLocation:
    """Where ``config``'s group keeps its lock, epochs and registry."""
    zookeeper = config.coordination == "zookeeper"
    return GroupLocation(
        config.share,
        config.zookeeper_hosts if zookeeper else None,
        config.zookeeper_path,
        zookeeper_access(config) if zookeeper else None,
        config.lock_method,
    )


def open_share_port(config: NodeConfig, on_session_state: Callable[[str], None]) -> SharePort:
    """The port for ``config`` (built by ``share/factory.py``); ``on_session_state`` hears
    each change of a coordination service's session (on that client's thread: post, never
    block)."""
    return open_port(
        group_location(config),
        session_timeout_s=config.zookeeper_session_timeout_ms / 1000,
        # A request outlasting the keepalive could not have kept the claim anyway.
        request_timeout_s=max(config.lock_keep_alive_period_ms / 1000, 0.1),
        on_session_state=on_session_state,
        on_planted_epoch=lambda epoch: _planted_epoch_replaced(config, epoch),
    )


def _planted_epoch_replaced(config: NodeConfig, epoch: int) -> None:
    log.warning(
        "%s node %s claimed epoch %d over an epochs/%d znode that no claim wrote (the counter "
        "had not reached it): something without primacy's identity writes %s; check its "
        "ACLs (primacy doctor --zookeeper)",
        codes.PLANTED_EPOCH_REPLACED,
        config.node_id,
        epoch,
        epoch,
        config.zookeeper_path,
    )
