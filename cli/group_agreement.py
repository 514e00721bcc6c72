"""``primacy run`` agrees with the group before it touches the lock: the settings every node must
share (``share/group_settings.py``), recorded on the share by the group's first node.

A lock method the operator left at its default follows the record (a node started with the
README's two flags joins a group the example config created); one set explicitly that differs,
or another coordination, refuses the start with a sentence that says what to change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from primacy.cli import codes
from primacy.share.group_settings import (
    GroupSettings,
    GroupSettingsUnreadable,
    agree_group_settings,
    settled_group_settings,
)
from primacy.share.layout import ShareLayout
from primacy.share.posix_lock import LockMethod

if TYPE_CHECKING:  # the config (pydantic) is loaded only by commands that run a node
    from primacy.supervisor.config import NodeConfig

log = logging.getLogger("primacy.cli")


class GroupDisagrees(Exception):
    """This node's settings differ from the group's record; the message says what to change."""


def settings_of(config: NodeConfig) -> GroupSettings:
    zookeeper = config.coordination == "zookeeper"
    return GroupSettings(
        lock_method=str(config.lock_method),
        coordination=config.coordination,
        zookeeper_path=config.zookeeper_path if zookeeper else None,
        recorded_by=config.node_id,
    )


def join_group(
    config: NodeConfig, check_share: Callable[[NodeConfig], None]
) -> tuple[NodeConfig, GroupSettings]:
    """``config`` as it joins the group (the recorded lock method adopted where the operator
    left the default), and the record; GroupDisagrees if it cannot join, OSError if the
    share cannot be read or written. ``check_share`` probes the share with the lock method
    the node will use, before a new group's settings are recorded (a share whose locks do
    not work is left as it was found)."""
    layout = ShareLayout(config.share)
    try:
        recorded = settled_group_settings(layout)
        if recorded is None:
            check_share(config)
            recorded = agree_group_settings(layout, settings_of(config))
            joined = _agreed(config, recorded)
            if joined.lock_method != config.lock_method:  # another first node's record won
                check_share(joined)
        else:
            joined = _agreed(config, recorded)
            check_share(joined)
    except GroupSettingsUnreadable as exc:
        raise GroupDisagrees(
            f"{codes.GROUP_SETTINGS_UNREADABLE} {exc}: it records how the group locks the share. "
            "Restore it, or remove it if every node of the group runs with the same lock_method "
            "and coordination (the next node to start records its own)"
        ) from exc
    if joined is not config:
        log.info(
            "%s node %s uses lock_method = %r, as the group on %s records",
            codes.GROUP_SETTINGS_ADOPTED,
            config.node_id,
            recorded.lock_method,
            config.share,
        )
    return joined, recorded


def _agreed(config: NodeConfig, recorded: GroupSettings) -> NodeConfig:
    """``config`` with the record's lock method adopted; GroupDisagrees if it still differs."""
    joined = adopt_group_settings(config, recorded)
    differences = recorded.differences(settings_of(joined))
    if differences:
        key, theirs, mine = differences[0]
        by = f" (recorded by {recorded.recorded_by})" if recorded.recorded_by else ""
        raise GroupDisagrees(
            f"{codes.GROUP_SETTINGS_DIFFER} the group on {config.share} uses {key} = "
            f"{theirs!r}{by}; this node is set to {mine!r}. Nodes that differ here never see "
            f"each other's lock: set {key} = {theirs!r} (or --{key.replace('_', '-')} "
            f"{theirs}) on this node, or change it on every node and the record together "
            '(docs/operator-guide.md, "What every node must agree on")'
        )
    return joined


def adopt_group_settings(config: NodeConfig, recorded: GroupSettings) -> NodeConfig:
    """``config`` with the recorded lock method where the operator did not set one (also
    applied to every edit of the config file, so a reload does not see it change)."""
    if "lock_method" in config.model_fields_set or str(config.lock_method) == recorded.lock_method:
        return config
    return config.model_copy(update={"lock_method": LockMethod(recorded.lock_method)})
