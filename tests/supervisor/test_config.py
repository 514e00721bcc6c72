"""Configuration: TOML file plus flags, flags win, bad input named by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config import ConfigError, load_config


def test_defaults_and_the_derived_takeover_delay(tmp_path: Path) -> None:
    config = load_config(None, {"node_id": "a", "share": tmp_path})
    assert config.lock_acquire_sleep_interval_ms == 100
    assert config.lock_keep_alive_period_ms == 250
    assert config.effective_takeover_delay_ms == 275
    assert config.priority == "normal" and config.http == "127.0.0.1:8008"


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    file = tmp_path / "node.toml"
    file.write_text(
        f'node_id = "file"\nshare = "{tmp_path}"\nlock_keep_alive_period_ms = 900\n'
        'priority = "high"\n'
    )
    config = load_config(
        file, {"node_id": "flag", "priority": None, "lock_keep_alive_period_ms": 400}
    )
    assert config.node_id == "flag"
    assert config.priority == "high"
    assert config.lock_keep_alive_period_ms == 400


def test_unknown_key_is_refused_by_name(tmp_path: Path) -> None:
    file = tmp_path / "node.toml"
    file.write_text('node_id = "a"\nlock_keep_alive = 5\n')
    with pytest.raises(ConfigError, match="unknown key 'lock_keep_alive'"):
        load_config(file, {})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lock_keep_alive_period_ms", 5, "lock_keep_alive_period_ms"),
        ("priority", "sometimes", "priority"),
        ("http", "localhost", "http"),
        ("node_id", "bad id!", "node_id"),
        ("lock_method", "fcntl", "lock_method"),
        ("takeover_delay_ms", 10, "takeover_delay_ms"),
    ],
)
def test_bad_values_are_refused_by_name(
    tmp_path: Path, key: str, value: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, {"node_id": "a", "share": tmp_path, key: value})


def test_missing_required_settings_say_which_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--share"):
        load_config(None, {"node_id": "a"})


def test_broken_toml_is_a_clear_error(tmp_path: Path) -> None:
    file = tmp_path / "node.toml"
    file.write_text("node_id = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(file, {})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", {})
