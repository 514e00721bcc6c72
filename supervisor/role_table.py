"""The whole policy for roles: for each role, the triggers it accepts and where each leads.

``RoleMachine`` (``roles.py``) applies it; a trigger missing for the current
role is a bug in the shell and raises there.
"""

from __future__ import annotations

from primacy.supervisor.role_events import Role

S = Role
TRANSITIONS: dict[Role, dict[str, Role]] = {
    S.STARTING: {
        "lock_acquired": S.ACQUIRED,
        "lock_busy": S.SLAVE,
        "lock_yielded": S.SLAVE,
        "not_eligible": S.SLAVE,
        "stop": S.STOPPED,
    },
    S.SLAVE: {
        "lock_acquired": S.ACQUIRED,
        "lock_busy": S.SLAVE,
        "lock_yielded": S.SLAVE,
        "stop": S.STOPPED,
    },
    S.ACQUIRED: {
        "epoch_claimed": S.ACQUIRED,
        "journal_opened": S.ACQUIRED,
        "journal_failed": S.DEMOTING,
        "claim_failed": S.DEMOTING,
        "pre_promote_vetoed": S.DEMOTING,
        "revalidated": S.ACQUIRED,
        "takeover_ready": S.MASTER,
        "lease_lost": S.DEMOTING,
        "stop": S.STOPPING,
    },
    S.MASTER: {
        "revalidated": S.MASTER,
        "child_exited": S.MASTER,
        "lease_lost": S.DEMOTING,
        "child_crash_loop": S.DEMOTING,
        "step_down": S.DEMOTING,
        "stop": S.STOPPING,
    },
    S.DEMOTING: {"serving_stopped": S.SLAVE, "stop": S.STOPPING},
    S.STOPPING: {"serving_stopped": S.STOPPED, "stop": S.STOPPING},
    S.STOPPED: {"stop": S.STOPPED},
}
del S
