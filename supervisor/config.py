"""A node's configuration: TOML file plus command-line flags, validated once, frozen after.

Every key of the TOML file is also a flag of ``primacy run`` (``lock_keep_alive_period_ms``
is ``--lock-keep-alive-period-ms``; ``exec`` is ``--exec -- CMD ARGS``); flags win over
the file. Unknown keys and bad values are refused with a message that names the key.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from primacy.locker.lockfile import LockMethod
from primacy.store.config import MIB, StoreConfig, SyncPolicy
from primacy.supervisor.roles import Priority, Timings

# Defaults chosen from measurements (docs/benchmarks.md, docs/operator-guide.md):
# a slave tries the lock 10 times a second, a master confirms its lease twice
# per keepalive period, and a new master waits one keepalive period plus a
# margin for clock-rate drift before serving, so that an old master that lost
# its lock behind its back has stopped claiming the role before the new one
# starts. Data safety does not rest on that wait (epoch fencing does); the wait
# is what keeps load balancers from ever seeing two masters.
DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL_MS = 100
DEFAULT_LOCK_KEEP_ALIVE_PERIOD_MS = 250
TAKEOVER_DRIFT_MARGIN = 0.10

# A batch must stay below 2 GiB (docs/journal-format.md) and hold one whole message.
MAX_MESSAGE_SIZE_LIMIT = 1024 * MIB
# The journal's own defaults, which the node's keys share.
STORE_DEFAULTS = StoreConfig(share=Path("."), node_id="defaults")
# Written for "no limit" in the TOML file or on the command line, for these keys.
NO_LIMIT = "none"
NO_LIMIT_KEYS = ("retention_max_age_s", "retention_max_bytes")
# StoreConfig requires max_batch_bytes >= max_message_size + this.
BATCH_OVERHEAD_BYTES = 4096

_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ConfigError(Exception):
    """The configuration is unusable; the message names the key and what is wrong."""


def parse_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT (for example 127.0.0.1:8008)")
    return host.strip("[]"), int(port)


class NodeConfig(BaseModel):
    """Everything ``primacy run`` needs, typed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_id: str
    share: Path
    http: str = "127.0.0.1:8008"
    stomp: str | None = None
    lock_acquire_sleep_interval_ms: int = Field(
        DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL_MS, ge=10, le=600_000
    )
    lock_keep_alive_period_ms: int = Field(DEFAULT_LOCK_KEEP_ALIVE_PERIOD_MS, ge=20, le=600_000)
    takeover_delay_ms: int | None = Field(None, ge=0, le=3_600_000)
    priority: Literal["never", "normal", "high", "highest"] = "normal"
    lock_method: LockMethod = LockMethod.FLOCK
    exec: tuple[str, ...] = ()
    exec_stop_grace_ms: int = Field(5000, ge=0, le=600_000)
    exec_max_restarts: int = Field(3, ge=0, le=1000)
    exec_restart_window_s: float = Field(60.0, gt=0)
    crash_loop_hold_off_ms: int = Field(10_000, ge=0)
    registry_refresh_ms: int = Field(1000, ge=100)
    force_unsupported_share: bool = False
    sync_policy: SyncPolicy = SyncPolicy.SYNC
    admin_token_file: Path | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # The journal's settings (store.config.StoreConfig, same defaults).
    segment_max_bytes: int = Field(STORE_DEFAULTS.segment_max_bytes, ge=4096)
    max_message_size: int = Field(STORE_DEFAULTS.max_message_size, ge=1, le=MAX_MESSAGE_SIZE_LIMIT)
    retention_max_age_s: float | None = Field(
        STORE_DEFAULTS.retention_max_age_s, ge=0, allow_inf_nan=False
    )
    retention_max_bytes: int | None = Field(STORE_DEFAULTS.retention_max_bytes, ge=0)
    dedupe_window_messages: int = Field(STORE_DEFAULTS.dedupe_window_messages, ge=0)

    @field_validator("node_id")
    @classmethod
    def _node_id_is_a_name(cls, value: str) -> str:
        if not _NODE_ID.match(value):
            raise ValueError(
                "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("http", "stomp")
    @classmethod
    def _is_host_port(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_port(value)
        return value

    @field_validator(*NO_LIMIT_KEYS, mode="before")
    @classmethod
    def _none_means_no_limit(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() == NO_LIMIT:
            return None
        return value

    @model_validator(mode="after")
    def _takeover_delay_covers_keepalive(self) -> NodeConfig:
        if (
            self.takeover_delay_ms is not None
            and self.takeover_delay_ms < self.lock_keep_alive_period_ms
        ):
            raise ValueError(
                f"takeover_delay_ms ({self.takeover_delay_ms}) must be at least "
                f"lock_keep_alive_period_ms ({self.lock_keep_alive_period_ms}): a shorter wait "
                "lets a new master serve while an old "
                "one that lost its lock unknowingly may still claim the role"
            )
        return self

    @property
    def http_host_port(self) -> tuple[str, int]:
        return parse_host_port(self.http)

    @property
    def effective_takeover_delay_ms(self) -> int:
        if self.takeover_delay_ms is not None:
            return self.takeover_delay_ms
        return round(self.lock_keep_alive_period_ms * (1 + TAKEOVER_DRIFT_MARGIN))

    @property
    def node_priority(self) -> Priority:
        return Priority[self.priority.upper()]

    def timings(self) -> Timings:
        return Timings(
            lock_acquire_sleep_interval_s=self.lock_acquire_sleep_interval_ms / 1000,
            lock_keep_alive_period_s=self.lock_keep_alive_period_ms / 1000,
            takeover_delay_s=self.effective_takeover_delay_ms / 1000,
            child_max_restarts=self.exec_max_restarts,
            child_restart_window_s=self.exec_restart_window_s,
            crash_loop_hold_off_s=self.crash_loop_hold_off_ms / 1000,
        )

    def store_config(self) -> StoreConfig:
        """The journal's settings; a batch is made big enough for one message of the maximum."""
        return StoreConfig(
            share=self.share,
            node_id=self.node_id,
            sync_policy=self.sync_policy,
            segment_max_bytes=self.segment_max_bytes,
            max_message_size=self.max_message_size,
            max_batch_bytes=max(
                STORE_DEFAULTS.max_batch_bytes, self.max_message_size + BATCH_OVERHEAD_BYTES
            ),
            retention_max_age_s=self.retention_max_age_s,
            retention_max_bytes=self.retention_max_bytes,
            dedupe_window_messages=self.dedupe_window_messages,
        )


CONFIG_KEYS = tuple(NodeConfig.model_fields)


def load_config(config_file: Path | None, overrides: dict[str, Any]) -> NodeConfig:
    """Merge the TOML file (if any) with flag overrides (flags win) and validate."""
    values: dict[str, Any] = {}
    if config_file is not None:
        try:
            values.update(tomllib.loads(Path(config_file).read_text()))
        except FileNotFoundError:
            raise ConfigError(f"the config file {config_file} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"the config file {config_file} is not valid TOML: {exc}") from exc
        unknown = sorted(set(values) - set(CONFIG_KEYS))
        if unknown:
            raise ConfigError(
                f"unknown key {unknown[0]!r} in {config_file}; known keys: {', '.join(CONFIG_KEYS)}"
            )
    values.update({key: value for key, value in overrides.items() if value is not None})
    for required in ("node_id", "share"):
        if required not in values:
            flag = "--" + required.replace("_", "-")
            raise ConfigError(
                f"{required!r} is not set: give {flag} or put {required} in the config file"
            )
    try:
        return NodeConfig(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "configuration"
        hint = f' (or "{NO_LIMIT}" for no limit)' if key in NO_LIMIT_KEYS else ""
        raise ConfigError(f"bad value for {key!r}: {first['msg']}{hint}") from exc
