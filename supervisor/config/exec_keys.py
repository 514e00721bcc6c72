"""The keys of exec mode: the master's child, its guardian's timings, readiness and hooks.

``NodeConfig`` (``config.py``) inherits them; docs/operator-guide.md, "Supervising
your own broker", shows them at work.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from primacy.store.config_keys import Bool, Float, Int, key

_READY_CHECK = re.compile(r"notify|tcp:\[?[A-Za-z0-9.:_-]+\]?:[0-9]{1,5}")


class ExecKeys(BaseModel):
    """What runs while this node is master, and when it counts as started."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exec: tuple[str, ...] = key(
        (), "the command to run as the master's child: everything after --exec (and an --)"
    )
    exec_warm_standby: Bool = key(
        False,
        "start the exec child on every node at node start, behind a gate (PRIMACY_GATE_FD) it "
        "waits on before it touches the store; promotion opens the gate",
    )
    exec_stop_grace_ms: Int = key(
        5000, "SIGTERM to SIGKILL grace for the exec child", metavar="MS", ge=0, le=600_000
    )
    exec_max_restarts: Int = key(
        3,
        "a child that exits more than N times within --exec-restart-window-s makes the node "
        "give the lock up so another node can try",
        metavar="N",
        ge=0,
        le=1000,
    )
    exec_restart_window_s: Float = key(
        60.0, "the window in which the exec child's exits are counted", metavar="S", gt=0, le=86_400
    )
    exec_ready: str | None = key(
        None,
        "when the exec child counts as ready to serve: tcp:HOST:PORT (it accepts a connection "
        "there) or notify (it sends READY=1 to the NOTIFY_SOCKET primacy gives it); until then "
        "/master and /readiness answer 503",
        metavar="tcp:HOST:PORT|notify",
    )
    exec_ready_cmd: str | None = key(
        None,
        "a shell command that exits 0 once the exec child is ready to serve (tried every 0.5 s); "
        "instead of exec_ready",
        metavar="CMD",
    )
    exec_ready_timeout_s: Float = key(
        120.0,
        "an exec child not ready this long after its start has failed to start: its tree is "
        "killed and the start counts as an exit (code 124)",
        metavar="S",
        gt=0,
        le=86_400,
    )
    pre_promote: str | None = key(
        None,
        "a shell command run after this node takes the lock and before it serves (with "
        "PRIMACY_EPOCH, PRIMACY_NODE_ID, PRIMACY_SHARE set); a non-zero exit or a timeout vetoes "
        "the takeover and the node gives the lock up",
        metavar="CMD",
    )
    pre_promote_timeout_s: Float = key(
        30.0,
        "how long pre_promote may run before it counts as a veto",
        metavar="S",
        gt=0,
        le=3600,
    )

    @field_validator("exec_ready")
    @classmethod
    def _ready_check_is_known(cls, value: str | None) -> str | None:
        if value is not None and not _READY_CHECK.fullmatch(value):
            raise ValueError("use tcp:HOST:PORT (for example tcp:127.0.0.1:61613) or notify")
        return value

    @model_validator(mode="after")
    def _readiness_needs_a_child(self) -> ExecKeys:
        if self.exec_ready is not None and self.exec_ready_cmd is not None:
            raise ValueError("give exec_ready or exec_ready_cmd, not both")
        if (self.exec_ready or self.exec_ready_cmd) and not self.exec:
            raise ValueError("exec_ready and exec_ready_cmd check an exec child: give --exec too")
        if self.exec_warm_standby and not self.exec:
            raise ValueError("exec_warm_standby keeps an exec child standing by: give --exec too")
        return self
