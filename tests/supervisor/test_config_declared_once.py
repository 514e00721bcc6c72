"""Each configuration key is declared once; flags, live keys and the journal's and broker's
settings follow, and values are taken as typed, never coerced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from primacy.broker.config import BrokerConfig
from primacy.cli.main import build_parser
from primacy.store.config import StoreConfig
from primacy.supervisor.config import (
    BROKER_KEYS,
    JOURNAL_KEYS,
    LIVE_KEYS,
    ConfigError,
    NodeConfig,
    load_config,
)
from tests.harness.cli import primacy


def _run_parser_actions() -> dict[str, object]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    run = subparsers.choices["run"]  # type: ignore[attr-defined]
    return {action.dest: action for action in run._actions}


def test_every_key_is_a_flag_with_the_declared_help() -> None:
    actions = _run_parser_actions()
    for name, field in NodeConfig.model_fields.items():
        if name == "exec":
            continue
        action = actions[name]
        assert action.option_strings[0] == "--" + name.replace("_", "-")  # type: ignore[attr-defined]
        help_text = action.help.replace("%%", "%")  # type: ignore[attr-defined]
        assert help_text.startswith(field.description or "?"), name
        assert help_text.endswith("[live]") == (name in LIVE_KEYS), name


def test_the_live_keys_are_the_ones_a_running_node_applies() -> None:
    assert {
        "priority",
        "lock_acquire_sleep_interval_ms",
        "lock_keep_alive_period_ms",
        "takeover_delay_ms",
    } == LIVE_KEYS


def test_the_journal_and_the_broker_get_every_key_they_declare(tmp_path: Path) -> None:
    config = NodeConfig(
        node_id="a",
        share=tmp_path,
        sync_policy="no_sync",
        segment_max_bytes=8192,
        retention_max_bytes=7,
        stomp_users=tmp_path / "users.json",
        max_connections=5,
        flow_control_timeout_s=2.5,
    )
    store, broker = config.store_config(), config.broker_config()
    assert {"sync_policy", "segment_max_bytes", "retention_max_bytes"} <= set(JOURNAL_KEYS)
    assert {"stomp_users", "max_connections", "flow_control_timeout_s"} <= set(BROKER_KEYS)
    for name in JOURNAL_KEYS:
        assert getattr(store, name) == getattr(config, name), name
    for name in BROKER_KEYS:
        assert getattr(broker, name) == getattr(config, name), name


def test_the_broker_settings_default_to_the_brokers_own(tmp_path: Path) -> None:
    config = load_config(None, {"node_id": "a", "share": tmp_path})
    assert config.broker_config() == BrokerConfig()


@pytest.mark.parametrize(
    ("build", "key", "value"),
    [
        (lambda **kw: StoreConfig(share=Path("."), node_id="a", **kw), "segment_max_bytes", 4095),
        (lambda **kw: StoreConfig(share=Path("."), node_id="a", **kw), "max_message_size", 0),
        (lambda **kw: StoreConfig(share=Path("."), node_id="a", **kw), "retention_max_age_s", -1),
        (BrokerConfig, "max_transaction_bytes", 1023),
        (BrokerConfig, "max_redeliveries", -1),
        (BrokerConfig, "flow_control_timeout_s", 0.0),
    ],
)
def test_the_journal_and_the_broker_refuse_what_the_node_refuses(
    tmp_path: Path, build: Any, key: str, value: object
) -> None:
    """One declaration: the bounds an operator meets are the component's own."""
    with pytest.raises(ConfigError, match=f"bad value for '{key}'"):
        load_config(None, {"node_id": "a", "share": tmp_path, key: value})
    with pytest.raises(ValidationError, match=key):
        build(**{key: value})


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('force_unsupported_share = "yes"', "force_unsupported_share"),
        ("force_unsupported_share = 1", "force_unsupported_share"),
        ('lock_keep_alive_period_ms = "250"', "lock_keep_alive_period_ms"),
        ("lock_keep_alive_period_ms = 250.0", "lock_keep_alive_period_ms"),
        ("exec_restart_window_s = inf", "exec_restart_window_s"),
        ("retention_max_age_s = nan", "retention_max_age_s"),
        ("registry_refresh_ms = 99999999999999999", "registry_refresh_ms"),
        ("dedupe_window_messages = 100000000000", "dedupe_window_messages"),
        ('http = "127.0.0.1:99999"', "http"),
    ],
)
def test_values_are_taken_as_typed_and_bounded(tmp_path: Path, line: str, key: str) -> None:
    """Through ``primacy run --config``, as an operator meets it: exit 2, the key named."""
    config_file = tmp_path / "node.toml"
    config_file.write_text(f'share = "{tmp_path}"\nnode_id = "a"\n{line}\n')
    result = primacy("run", "--config", str(config_file))
    assert result.returncode == 2, result.stderr
    assert f"'{key}'" in result.stderr and "Traceback" not in result.stderr


def test_a_node_id_with_a_newline_is_refused_on_the_command_line(tmp_path: Path) -> None:
    result = primacy("run", "--node-id", "evil\n", "--share", str(tmp_path))
    assert result.returncode == 2
    assert "PRIMACY-2001 bad value for 'node_id'" in result.stderr
