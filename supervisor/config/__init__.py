"""A node's configuration: TOML file plus command-line flags, validated once, frozen after.

Every key of the TOML file is also a flag of ``primacy run`` (``lock_keep_alive_period_ms``
is ``--lock-keep-alive-period-ms``; ``exec`` is ``--exec -- CMD ARGS``); flags win over
the file. Unknown keys and bad values are refused with a message that names the key.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from primacy.broker.config import BrokerConfig, BrokerKeys
from primacy.broker.frames import FrameLimits
from primacy.share.posix_lock import LockMethod
from primacy.store.config import (
    BATCH_OVERHEAD_BYTES,
    DEFAULT_MAX_BATCH_BYTES,
    NO_LIMIT,
    NO_LIMIT_KEYS,
    JournalKeys,
    StoreConfig,
)
from primacy.store.config_keys import Bool, Float, Int, key
from primacy.supervisor.config.coordination_keys import CoordinationKeys
from primacy.supervisor.config.exec_keys import ExecKeys
from primacy.supervisor.config.lb_keys import LoadBalancerKeys
from primacy.supervisor.config.listen_addresses import parse_host_port, same_listener
from primacy.supervisor.machine.role_events import TAKEOVER_DRIFT_MARGIN, Priority, Timings

# Defaults chosen from measurements (docs/benchmarks.md, docs/operator-guide.md):
# a slave tries the lock 10 times a second, a master confirms its lease twice
# per keepalive period, and a new master waits one keepalive period plus a
# margin for clock-rate drift before serving, so that an old master that lost
# its lock behind its back has stopped claiming the role before the new one
# starts. Data safety does not rest on that wait (epoch fencing does); the wait
# is what keeps load balancers from ever seeing two masters.
DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL_MS = 100
DEFAULT_LOCK_KEEP_ALIVE_PERIOD_MS = 250
# systemd's watchdog, unless watchdog_s says otherwise (NodeConfig.watchdog_timeout_s).
WATCHDOG_KEEPALIVES = 15
WATCHDOG_MIN_S = 10.0
# A master's registry entry may be late by a refresh or two (a slow share); a stall is
# judged over at least this many refresh periods.
STALL_REFRESHES = 3
# Each try after a failed start claims an epoch (and opens a journal segment): a shorter
# hold-off turns a node that cannot serve into a stream of them.
MIN_CRASH_LOOP_HOLD_OFF_MS = 1000

_NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class ConfigError(Exception):
    """The configuration is unusable; the message names the key and what is wrong."""


class NodeKeys(BaseModel):
    """The node's own keys: who it is, the lock, the endpoints and the registry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_id: str = key(..., "this node's name, unique in the group")
    share: Path = key(..., "the shared data directory")
    http: str = key("127.0.0.1:8008", "HOST:PORT of the status endpoint", metavar="HOST:PORT")
    stomp: str | None = key(
        None,
        "serve the built-in STOMP broker here while master (off unless given)",
        metavar="HOST:PORT",
    )
    stomp_websocket: str | None = key(
        None,
        "serve the same broker over WebSocket here too (ws://, or wss:// with stomp_tls_cert) "
        "while master; needs stomp",
        metavar="HOST:PORT",
    )
    lock_acquire_sleep_interval_ms: Int = key(
        DEFAULT_LOCK_ACQUIRE_SLEEP_INTERVAL_MS,
        "how often a slave tries the lock",
        live=True,
        metavar="MS",
        aliases=("--lock-acquire-sleep-interval",),
        ge=10,
        le=600_000,
    )
    lock_keep_alive_period_ms: Int = key(
        DEFAULT_LOCK_KEEP_ALIVE_PERIOD_MS,
        "a master's claim lasts this long after each lease check; it checks four times per period",
        live=True,
        metavar="MS",
        aliases=("--lock-keep-alive-period",),
        ge=20,
        le=600_000,
    )
    takeover_delay_ms: Int | None = key(
        None,
        "wait after claiming the epoch before serving; at least the keepalive period",
        live=True,
        metavar="MS",
        default_text="keepalive period + 10 %",
        ge=0,
        le=3_600_000,
    )
    priority: Literal["never", "normal", "high", "highest"] = key(
        "normal", "never: never master; lower priorities wait longer for a free lock", live=True
    )
    watchdog_s: Float | None = key(
        None,
        "under systemd, the node has itself killed and restarted when no lock operation has "
        "completed for this long (a hung mount); 0: no watchdog. A unit's WatchdogSec= wins",
        metavar="S",
        default_text="15 keepalive periods, at least 10 s",
        ge=0,
        le=3600,
    )
    lock_method: LockMethod = key(LockMethod.FLOCK, "lock primitive")
    crash_loop_hold_off_ms: Int = key(
        10_000,
        "after giving the lock up for a crash-looping child, a journal that failed to open, an "
        "epoch the share would not record or a STOMP port that cannot be bound, wait this long "
        "before trying the lock again",
        metavar="MS",
        ge=MIN_CRASH_LOOP_HOLD_OFF_MS,
        le=3_600_000,
    )
    registry_refresh_ms: Int = key(
        1000,
        "how often this node publishes itself in the share's nodes/ registry and reads the others",
        metavar="MS",
        ge=100,
        le=60_000,
    )
    journal_follow_interval_ms: Int = key(
        100,
        "a slave reads what the master appended to the journal this often, so a takeover reads "
        "only the tail past it (a hot standby); 0: no following, a takeover reads the journal",
        metavar="MS",
        ge=0,
        le=60_000,
    )
    stall_takeover_ms: Int = key(
        0,
        "a slave refused the lock replaces the lock file once the holder's registry entry has "
        "not changed for this long (a crashed NFSv4 client's lock otherwise lasts the server's "
        "lease); 0: never. At least three registry refreshes",
        metavar="MS",
        ge=0,
        le=3_600_000,
    )
    force_unsupported_share: Bool = key(
        False, "start even on a share `primacy doctor` refuses (logged loudly; you own the risk)"
    )
    http_tls_cert: Path | None = key(
        None,
        "serve the HTTP endpoint over TLS with this PEM certificate chain (with http_tls_key); "
        "a new file is picked up without a restart",
        metavar="FILE",
    )
    http_tls_key: Path | None = key(
        None, "the PEM private key of http_tls_cert (mode 600)", metavar="FILE"
    )
    http_tls_ca: Path | None = key(
        None,
        "require client certificates signed by this PEM CA (mutual TLS) on the HTTP endpoint",
        metavar="FILE",
    )
    http_max_connections: Int = key(
        64,
        "connections the HTTP endpoint serves at once; past it, a new one displaces the oldest "
        "that has not sent its whole request, from the network holding the most, or gets 503",
        metavar="N",
        ge=4,
        le=100_000,
    )
    http_max_connections_per_network: Int = key(
        16,
        "connections to the HTTP endpoint from one network (network_prefix_ipv4/ipv6); past "
        "it, a new one displaces that network's oldest that has not sent its whole request",
        metavar="N",
        ge=1,
        le=100_000,
    )
    admin_token_file: Path | None = key(
        None,
        "enables the admin endpoints (switchover, pause, resume, priority); the file holds the "
        "bearer token and must not be readable by group or others",
        metavar="FILE",
    )
    log_level: Literal["debug", "info", "warning", "error"] = key("info", "log level")


class NodeConfig(BrokerKeys, CoordinationKeys, ExecKeys, JournalKeys, LoadBalancerKeys, NodeKeys):
    """Everything ``primacy run`` needs, typed. Each key is declared once: the node's here, the
    exec child's in ``exec_keys.py``, coordination's in ``coordination_keys.py``, the
    journal's in ``store/config.py`` and the broker's in ``broker/config.py``. The TOML
    schema, the ``primacy run`` flags (``cli/run.py``) and the live keys are derived from these
    declarations, and the journal and the broker get their keys back under the same names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("node_id")
    @classmethod
    def _node_id_is_a_name(cls, value: str) -> str:
        if not _NODE_ID.fullmatch(value):
            raise ValueError(
                "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("http", "stomp", "stomp_websocket")
    @classmethod
    def _is_host_port(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_port(value)
        return value

    @field_validator("crash_loop_hold_off_ms", mode="before")
    @classmethod
    def _hold_off_holds_off(cls, value: object) -> object:
        if type(value) is int and value < MIN_CRASH_LOOP_HOLD_OFF_MS:
            raise ValueError(
                f"must be at least {MIN_CRASH_LOOP_HOLD_OFF_MS} ms: each try after a failed "
                "start claims a new epoch and journal segment, and a shorter hold-off makes a "
                "node that cannot serve claim them without pause"
            )
        return value

    @model_validator(mode="after")
    def _stomp_and_http_do_not_share_a_port(self) -> NodeConfig:
        if self.stomp is not None and same_listener(self.stomp, self.http):
            raise ValueError(
                f"stomp ({self.stomp}) and http ({self.http}) would listen on the same port: "
                "give each its own"
            )
        if self.stomp_websocket is not None:
            if self.stomp is None:
                raise ValueError("stomp_websocket serves the STOMP broker: give stomp too")
            for other in ("stomp", "http"):
                if same_listener(self.stomp_websocket, getattr(self, other)):
                    raise ValueError(
                        f"stomp_websocket ({self.stomp_websocket}) and {other} "
                        f"({getattr(self, other)}) would listen on the same port: give each its own"
                    )
        return self

    @model_validator(mode="after")
    def _tls_certificates_come_with_their_keys(self) -> NodeConfig:
        for side in ("stomp", "http"):
            cert, key_file, ca = (
                getattr(self, f"{side}_tls_{part}") for part in ("cert", "key", "ca")
            )
            if (cert is None) != (key_file is None):
                raise ValueError(f"{side}_tls_cert and {side}_tls_key go together: give both")
            if ca is not None and cert is None:
                raise ValueError(f"{side}_tls_ca needs {side}_tls_cert and {side}_tls_key")
        return self

    @model_validator(mode="after")
    def _stall_outlasts_registry_refreshes(self) -> NodeConfig:
        if 0 < self.stall_takeover_ms < STALL_REFRESHES * self.registry_refresh_ms:
            raise ValueError(
                f"stall_takeover_ms ({self.stall_takeover_ms}) must be 0 or at least "
                f"{STALL_REFRESHES} registry refreshes ({STALL_REFRESHES} x registry_refresh_ms = "
                f"{STALL_REFRESHES * self.registry_refresh_ms}): a master refreshes its entry "
                "every registry_refresh_ms, and one late refresh must not cost a failover"
            )
        if self.stall_takeover_ms and self.coordination == "zookeeper":
            raise ValueError(
                "stall_takeover_ms is for a lock on the share; on ZooKeeper a stalled master's "
                "lock goes when its session expires (zookeeper_session_timeout_ms)"
            )
        return self

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

    @model_validator(mode="after")
    def _coordination_is_complete(self) -> NodeConfig:
        self.check_coordination(self.lock_keep_alive_period_ms, TAKEOVER_DRIFT_MARGIN)
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
    def watchdog_timeout_s(self) -> float | None:
        """The systemd watchdog the node asks for, None for none. Derived from the keepalive
        unless set: a master completes a lock operation every half keepalive, so 15 periods
        without one is a hung share, not a slow one; 10 s at least, as the loaded machine's
        own stalls (GC, swapping) must not restart a healthy node."""
        if self.watchdog_s is None:
            return max(WATCHDOG_MIN_S, WATCHDOG_KEEPALIVES * self.lock_keep_alive_period_ms / 1000)
        return self.watchdog_s or None

    @property
    def stop_timeout_s(self) -> float:
        """How long a stop may take: the child's grace, then releasing the lock, a lock call
        allowed as long as the watchdog allows one (10 s with no watchdog)."""
        grace_s = self.exec_stop_grace_ms / 1000 if self.exec else 0.0
        lock_call_s = self.watchdog_timeout_s or WATCHDOG_MIN_S
        return grace_s + lock_call_s

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

    def broker_config(self) -> BrokerConfig:
        """The connector's settings: its limits as configured, and frames big enough for the
        largest message the journal takes plus a full header section."""
        default = FrameLimits()
        largest = self.max_message_size + default.max_header_bytes
        return BrokerConfig(
            frame_limits=FrameLimits(max_frame_bytes=max(default.max_frame_bytes, largest)),
            **{name: getattr(self, name) for name in BROKER_KEYS},
        )

    def store_config(self) -> StoreConfig:
        """The journal's settings: its keys, who and where, and a batch made big enough for one
        message of the maximum size."""
        return StoreConfig(
            share=self.share,
            node_id=self.node_id,
            max_batch_bytes=max(
                DEFAULT_MAX_BATCH_BYTES, self.max_message_size + BATCH_OVERHEAD_BYTES
            ),
            **{name: getattr(self, name) for name in JOURNAL_KEYS},
        )


CONFIG_KEYS = tuple(NodeConfig.model_fields)
# Applied when the config file is edited; every other key waits for a restart.
LIVE_KEYS = frozenset(
    name
    for name, field in NodeConfig.model_fields.items()
    if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("live")
)
# The keys NodeConfig hands back to the journal and the broker, who declared them.
JOURNAL_KEYS = tuple(JournalKeys.model_fields)
BROKER_KEYS = tuple(BrokerKeys.model_fields)


def _did_you_mean(unknown: str) -> str:
    """The known keys an unknown one is close to, or where the list is: not all 60 of them."""
    close = difflib.get_close_matches(unknown, CONFIG_KEYS, n=3, cutoff=0.6)
    if close:
        return "; did you mean " + " or ".join(repr(key) for key in close) + "?"
    return "; `primacy run --help` and the operator guide's key tables list the known keys"


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
                f"unknown key {unknown[0]!r} in {config_file}{_did_you_mean(unknown[0])}"
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
        message = first["msg"].removeprefix("Value error, ")
        if not first["loc"]:  # a rule between keys; its message names them
            raise ConfigError(f"conflicting settings: {message}") from exc
        key = ".".join(str(part) for part in first["loc"])
        hint = f' (or "{NO_LIMIT}" for no limit)' if key in NO_LIMIT_KEYS else ""
        raise ConfigError(f"bad value for {key!r}: {message}{hint}") from exc
