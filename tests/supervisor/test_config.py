"""Configuration: TOML file plus flags, flags win, bad input named by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from primacy.store.config import MIB, StoreConfig, SyncPolicy
from primacy.supervisor.config import ConfigError, load_config


def test_defaults_and_the_derived_takeover_delay(tmp_path: Path) -> None:
    config = load_config(None, {"node_id": "a", "share": tmp_path})
    assert config.lock_acquire_sleep_interval_ms == 100
    assert config.lock_keep_alive_period_ms == 250
    assert config.effective_takeover_delay_ms == 275
    assert config.priority == "normal" and config.http == "127.0.0.1:8008"


@pytest.mark.parametrize(
    ("settings", "watchdog_s", "stop_s"),
    [
        ({}, 10.0, 10.0),  # the floor: 15 keepalives of 250 ms is under 10 s
        ({"lock_keep_alive_period_ms": 2000}, 30.0, 30.0),  # the nfs4 profile's keepalive
        ({"watchdog_s": 60.0}, 60.0, 60.0),
        ({"watchdog_s": 0.0}, None, 10.0),
        ({"exec": ["broker"], "exec_stop_grace_ms": 15000}, 10.0, 25.0),
    ],
)
def test_the_watchdog_and_stop_timeouts_derive_from_the_keepalive_and_grace(
    tmp_path: Path, settings: dict[str, object], watchdog_s: float | None, stop_s: float
) -> None:
    config = load_config(None, {"node_id": "a", "share": tmp_path, **settings})
    assert config.watchdog_timeout_s == watchdog_s
    assert config.stop_timeout_s == stop_s


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
        ("segment_max_bytes", 4095, "segment_max_bytes"),
        ("segment_max_bytes", "64MiB", "segment_max_bytes"),
        ("max_message_size", 0, "max_message_size"),
        ("max_message_size", 2 * 1024 * MIB, "max_message_size"),
        ("retention_max_age_s", -1, "retention_max_age_s"),
        ("retention_max_age_s", "a week", "retention_max_age_s.*none"),
        ("retention_max_age_s", float("inf"), "retention_max_age_s"),
        ("retention_max_bytes", -1, "retention_max_bytes"),
        ("dedupe_window_messages", -1, "dedupe_window_messages"),
        ("dedupe_window_messages", 1.5, "dedupe_window_messages"),
        ("exec_max_restarts", -1, "exec_max_restarts"),
        ("registry_refresh_ms", 10, "registry_refresh_ms"),
        ("stall_takeover_ms", 2999, "stall_takeover_ms .* at least 3 registry refreshes"),
        ("stall_takeover_ms", -1, "stall_takeover_ms"),
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


def test_store_settings_default_to_the_journals_own(tmp_path: Path) -> None:
    config = load_config(None, {"node_id": "a", "share": tmp_path})
    assert config.store_config() == StoreConfig(share=tmp_path, node_id="a")


def test_store_settings_from_the_file_and_flags_reach_the_store_config(tmp_path: Path) -> None:
    file = tmp_path / "node.toml"
    file.write_text(
        f'node_id = "a"\nshare = "{tmp_path}"\nsync_policy = "write_no_sync"\n'
        "segment_max_bytes = 1048576\nmax_message_size = 65536\n"
        'retention_max_age_s = 3600\nretention_max_bytes = "none"\n'
        "dedupe_window_messages = 500\n"
    )
    config = load_config(
        file,
        {"max_message_size": 131072, "retention_max_age_s": "none", "retention_max_bytes": None},
    )
    store = config.store_config()
    assert store.share == tmp_path and store.node_id == "a"
    assert store.sync_policy is SyncPolicy.WRITE_NO_SYNC
    assert store.segment_max_bytes == 1048576
    assert store.max_message_size == 131072  # the flag wins over the file
    assert store.retention_max_age_s is None  # the flag's "none": no age limit
    assert store.retention_max_bytes is None  # the file's "none"
    assert store.dedupe_window_messages == 500


def test_a_message_size_above_the_default_batch_still_makes_a_valid_store(tmp_path: Path) -> None:
    # StoreConfig refuses a batch that cannot hold one message of max_message_size.
    config = load_config(None, {"node_id": "a", "share": tmp_path, "max_message_size": 64 * MIB})
    store = config.store_config()
    assert store.max_message_size == 64 * MIB
    assert store.max_batch_bytes >= 64 * MIB + 4096


def test_a_stall_takeover_is_for_a_lock_on_the_share(tmp_path: Path) -> None:
    settings = {"node_id": "a", "share": tmp_path, "stall_takeover_ms": 6000}
    assert load_config(None, settings).stall_takeover_ms == 6000
    zookeeper = {"coordination": "zookeeper", "zookeeper_hosts": "127.0.0.1:2181"}
    with pytest.raises(ConfigError, match="session expires"):
        load_config(None, settings | zookeeper)
