"""Stable message codes the node logs (PRIMACY-10xx to 13xx); operators grep them: never renumber.

One declaration per code: the constant, and its meaning in ``TITLES`` (the
operator guide's table repeats it, ``tests/test_message_codes.py`` checks
both). Log with the constant, ``log.info("%s node %s ...", codes.NODE_STARTED, ...)``;
a retired code keeps its number out of use for ever.
"""

from __future__ import annotations

LAYER = "node"
NUMBERS = range(1000, 1400)
"""Where a new node code takes its number. ``CONFIG_REJECTED`` (2006) and
``NOTIFY_SOCKET_UNUSABLE`` (3040) are older than the ranges and keep theirs."""

NODE_STARTED = "PRIMACY-1000"
ROLE_CHANGED = "PRIMACY-1001"
EPOCH_CLAIMED = "PRIMACY-1002"
LEASE_LOST = "PRIMACY-1003"
LOCK_RELEASED = "PRIMACY-1004"
SERVING = "PRIMACY-1005"
SERVING_STOPPED = "PRIMACY-1006"
LOCK_ATTEMPT_FAILED = "PRIMACY-1007"
REGISTRY_NOT_REFRESHED = "PRIMACY-1008"
RELEASE_UNANSWERED = "PRIMACY-1009"
NODE_STOPPED = "PRIMACY-1010"
SHARE_EVENTS_UNAVAILABLE = "PRIMACY-1011"
ROLE_CHANGE_NOT_JOURNALED = "PRIMACY-1012"
RESTART_NEEDED = "PRIMACY-1013"
# 1014 is the journal's "transaction loss averted" (store/messages.py).
SERVING_NOT_STARTED = "PRIMACY-1015"
CONFIG_APPLIED = "PRIMACY-1016"
EVENT_REFUSED = "PRIMACY-1017"
SWITCHOVER_REQUESTED = "PRIMACY-1020"
GROUP_PAUSED = "PRIMACY-1021"
GROUP_RESUMED = "PRIMACY-1022"
PRIORITY_SET = "PRIMACY-1023"
GROUP_PAUSE_SEEN = "PRIMACY-1024"
STALLED_LOCK_REPLACED = "PRIMACY-1025"
COORDINATOR_BEHIND_SHARE = "PRIMACY-1026"
# Its reason and repair: for a coordinator's counter, and for the share's own epochs/.
COUNTER_BEHIND = (
    "{reason}. Find out who changed the coordinator (primacy doctor --zookeeper); "
    'docs/runbook.md, "PrimacyCoordinatorBehindShare", says how to bring its counter past {floor}'
)
EPOCHS_LOST = (
    "the share's epochs/ has no claim of epoch {floor}, yet its journal holds a segment a "
    "master of epoch {floor} wrote: epoch records were deleted or restored apart from the "
    "journal, and a claim now would set served segments aside. docs/runbook.md, "
    '"PrimacyCoordinatorBehindShare": primacy epochs raise SHARE records the journal\'s newest'
)
PLANTED_EPOCH_REPLACED = "PRIMACY-1027"
SHARE_UNUSABLE_BY_NODE = "PRIMACY-1030"
JOURNAL_FOLLOWER_FAILED = "PRIMACY-1031"
LB_TOLD = "PRIMACY-1040"
LB_UNREACHABLE = "PRIMACY-1041"
LB_REFUSED = "PRIMACY-1042"
CLAIM_LAPSE_NOT_A_CRASH = "PRIMACY-1050"
THREAD_DIED = "PRIMACY-1097"
ROLE_LOOP_FAILED = "PRIMACY-1098"
LOCK_JOB_FAILED = "PRIMACY-1099"
CHILD_STARTED = "PRIMACY-1101"
CHILD_TREE_STOPPED = "PRIMACY-1102"
CHILD_NOT_KILLED = "PRIMACY-1103"
CHILD_EXITED = "PRIMACY-1104"
CHILD_NOT_STARTED = "PRIMACY-1105"
CHILD_CLAIM_LAPSED = "PRIMACY-1106"
CHILD_READY = "PRIMACY-1107"
CHILD_NOT_READY = "PRIMACY-1108"
PRE_PROMOTE_VETOED = "PRIMACY-1109"
PRE_PROMOTE_ALLOWED = "PRIMACY-1110"
GATE_OPENED = "PRIMACY-1111"
STANDBY_EXITED = "PRIMACY-1112"
CLAIM_CONFIRMED_LATE = "PRIMACY-1113"
COORDINATION_SESSION = "PRIMACY-1150"
CONFIG_REJECTED = "PRIMACY-2006"
NOTIFY_SOCKET_UNUSABLE = "PRIMACY-3040"

TITLES = {
    NODE_STARTED: "the node started (share, HTTP address, priority)",
    ROLE_CHANGED: "role change `old -> new`, with the epoch and the reason",
    EPOCH_CLAIMED: "this node claimed epoch N (it took the lock)",
    LEASE_LOST: "the lease was lost; the node stopped serving at once",
    LOCK_RELEASED: "the lock was released (graceful stop or step-down)",
    SERVING: "serving as master with epoch N",
    SERVING_STOPPED: "stopped serving gracefully",
    LOCK_ATTEMPT_FAILED: "a lock attempt failed with an I/O error",
    REGISTRY_NOT_REFRESHED: "the node registry could not be refreshed",
    RELEASE_UNANSWERED: "the share did not answer while releasing the lock",
    NODE_STOPPED: "the node stopped",
    SHARE_EVENTS_UNAVAILABLE: "filesystem events unavailable; slaves rely on polling",
    ROLE_CHANGE_NOT_JOURNALED: "a role change could not be journaled",
    RESTART_NEEDED: "a config key changed that takes effect after a restart",
    SERVING_NOT_STARTED: (
        "serving could not start (STOMP port cannot be bound); stepping down and holding off"
    ),
    CONFIG_APPLIED: "the edited config file was applied",
    EVENT_REFUSED: "an event did not fit the role machine's state; it changed nothing",
    SWITCHOVER_REQUESTED: "switchover requested (admin)",
    GROUP_PAUSED: "group paused (admin)",
    GROUP_RESUMED: "group resumed (admin)",
    PRIORITY_SET: "priority set until restart (admin)",
    GROUP_PAUSE_SEEN: "the node sees the group paused or resumed",
    STALLED_LOCK_REPLACED: (
        "the lock's holder stalled (its registry entry unchanged for stall_takeover_ms while "
        "the lock was refused): this slave replaced the lock file to take over"
    ),
    COORDINATOR_BEHIND_SHARE: (
        "the coordinator has no claim of an epoch the share's journal shows was served "
        "(ZooKeeper's counter reset or restored; on the share, `epochs/` emptied or its newest "
        "claims gone): this node claims nothing and holds off"
    ),
    PLANTED_EPOCH_REPLACED: (
        "the next epoch's znode existed though the counter had not reached it (written outside "
        "the protocol): the claim replaced it atomically"
    ),
    SHARE_UNUSABLE_BY_NODE: (
        "this node cannot use a file or directory on the share (its owner or mode: another "
        "user wrote it): it claims no epoch until the path is fixed"
    ),
    JOURNAL_FOLLOWER_FAILED: (
        "reading the journal as a slave failed unexpectedly: the follower dropped its state and "
        "starts again; a takeover meanwhile reads the whole journal"
    ),
    LB_TOLD: (
        "this node told an HAProxy (its runtime API) that it serves (its server up, the "
        "backend's others down) or stopped serving (its server down)"
    ),
    LB_UNREACHABLE: (
        "an HAProxy's runtime API could not be reached; the push is retried every second and "
        "HAProxy's health check decides meanwhile"
    ),
    LB_REFUSED: (
        "an HAProxy refused the push (unknown backend or server, or a socket not at level "
        "admin); retried every second, its health check decides meanwhile"
    ),
    CLAIM_LAPSE_NOT_A_CRASH: (
        "the guardian killed the exec child because this node's claim lapsed unconfirmed (exit "
        "code 125): not counted toward the crash-loop hold-off; the child starts again once a "
        "lease check passes"
    ),
    THREAD_DIED: "a thread of the node died; the node stops with exit code 1",
    ROLE_LOOP_FAILED: "the role loop failed; the node stops with exit code 1",
    LOCK_JOB_FAILED: "a lock I/O job raised; its failure event reached the role loop",
    CHILD_STARTED: "the exec child started",
    CHILD_TREE_STOPPED: "the exec child's tree was stopped",
    CHILD_NOT_KILLED: "the exec child did not die after SIGKILL",
    CHILD_EXITED: "the exec child exited",
    CHILD_NOT_STARTED: "the exec child could not be started (counted as exit code 127)",
    CHILD_CLAIM_LAPSED: (
        "the guardian killed the exec child's tree, or did not start the child, or kept a warm "
        "standby's gate shut: the supervisor stopped confirming its claim or died (counted as "
        "exit code 125)"
    ),
    CHILD_READY: "the exec child passed its readiness check; the node now answers 200 on /master",
    CHILD_NOT_READY: (
        "the exec child was not ready within exec_ready_timeout_s; its tree is killed and the "
        "start counts as a failed one (exit code 124)"
    ),
    PRE_PROMOTE_VETOED: "the pre_promote command failed or timed out: this node gives the lock up",
    PRE_PROMOTE_ALLOWED: "the pre_promote command exited 0: the takeover may go on",
    GATE_OPENED: "the guardian opened the warm standby's gate: the broker may open the store",
    CLAIM_CONFIRMED_LATE: (
        "a lease check confirmed the exec child's claim after its guardian's deadline: the "
        "guardian kills the child (the host delays this node: CPU starvation, a slow share)"
    ),
    COORDINATION_SESSION: (
        "the node's ZooKeeper session changed state (connected, suspended, lost): a master's "
        "next lease check fails while it is not connected"
    ),
    STANDBY_EXITED: (
        "the warm standby exited behind its closed gate; a fresh one starts in a second"
    ),
    CONFIG_REJECTED: "an edited config file was rejected; the running configuration stays",
    NOTIFY_SOCKET_UNUSABLE: (
        "`NOTIFY_SOCKET` is set but names no usable socket; systemd notifications are off"
    ),
}
