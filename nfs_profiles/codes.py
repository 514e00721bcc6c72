"""Stable message codes of the share doctor and deployment (PRIMACY-3xxx); never renumber.

One declaration per code: the constant, and its meaning in ``TITLES`` (the operator guide's
table repeats it, ``tests/test_message_codes.py`` checks both). Operators grep these.
"""

from __future__ import annotations

LAYER = "doctor"
NUMBERS = range(3000, 4000)
"""Where a new doctor code takes its number; 3040 is the node's (``NOTIFY_SOCKET`` unusable,
``supervisor/codes.py``)."""

PATH_UNUSABLE = "PRIMACY-3001"
MOUNT_TABLE_UNREADABLE = "PRIMACY-3002"
FILESYSTEM_REFUSED = "PRIMACY-3003"
OPTION_REFUSED = "PRIMACY-3004"
OPTION_NOT_RECOMMENDED = "PRIMACY-3005"
OPTION_DISCOURAGED = "PRIMACY-3006"
FILESYSTEM_WARNING = "PRIMACY-3007"
FILESYSTEM_UNKNOWN = "PRIMACY-3008"
READ_ONLY_MOUNT = "PRIMACY-3009"

LOCK_ROUND_TRIP_FAILED = "PRIMACY-3010"
LOCK_ROUND_TRIP_SLOW = "PRIMACY-3011"
FSYNC_ROUND_TRIP_FAILED = "PRIMACY-3012"
FSYNC_ROUND_TRIP_SLOW = "PRIMACY-3013"
WRITABLE_BY_OTHERS = "PRIMACY-3014"
NOT_A_DIRECTORY = "PRIMACY-3015"
LOCK_FILE_OPEN_TO_OTHERS = "PRIMACY-3016"
SHARE_RENAMABLE_BY_OTHERS = "PRIMACY-3017"
LOCK_HELD_BY_A_STRANGER = "PRIMACY-3018"

RUN_SHARE_REFUSED = "PRIMACY-3020"
RUN_SHARE_FORCED = "PRIMACY-3021"
RUN_SHARE_WARNINGS = "PRIMACY-3022"

SYSTEMD_INSTALLED = "PRIMACY-3030"
SYSTEMD_UNINSTALLED = "PRIMACY-3031"
SYSTEMD_SOURCE_MISSING = "PRIMACY-3032"
SYSTEMD_BINARY_UNUSABLE = "PRIMACY-3033"

ZOOKEEPER_SERVER_UNAVAILABLE = "PRIMACY-3050"
ZOOKEEPER_NO_QUORUM = "PRIMACY-3051"
ZOOKEEPER_SESSION_TIMEOUT_CLAMPED = "PRIMACY-3052"
ZOOKEEPER_SESSION_SHORTER_THAN_KEEPALIVE = "PRIMACY-3053"
ZOOKEEPER_OPEN_ACL = "PRIMACY-3054"
ZOOKEEPER_CREDENTIALS_UNUSABLE = "PRIMACY-3055"
ZOOKEEPER_NO_CREDENTIALS = "PRIMACY-3056"
ZOOKEEPER_PLAINTEXT = "PRIMACY-3057"
GROUP_SETTINGS_UNREADABLE = "PRIMACY-3060"
GROUP_LOCK_METHOD_NOT_THE_PROFILES = "PRIMACY-3061"

SHARE_UNUSABLE_BY_SERVICE_USER = "PRIMACY-3070"
SERVICE_USER_UNKNOWN = "PRIMACY-3071"

TITLES = {
    PATH_UNUSABLE: "the share path does not exist or is not a directory (refused)",
    MOUNT_TABLE_UNREADABLE: "the mount table cannot be read or has no mount for the path (warning)",
    FILESYSTEM_REFUSED: "the filesystem type is refused whatever its options, e.g. OCFS2 (refused)",
    OPTION_REFUSED: (
        "a mount option makes the lock unsafe, e.g. nolock, local_lock=, vers=3 (refused)"
    ),
    OPTION_NOT_RECOMMENDED: "a recommended mount option is missing or has another value (warning)",
    OPTION_DISCOURAGED: (
        "a mount option weakens the guarantees, e.g. lookupcache=pos, nobarrier (warning)"
    ),
    FILESYSTEM_WARNING: "the filesystem type works with caveats, e.g. tmpfs or FUSE (warning)",
    FILESYSTEM_UNKNOWN: (
        "no profile knows the filesystem type; the local profile is assumed (warning)"
    ),
    READ_ONLY_MOUNT: "the share is mounted read-only (refused)",
    LOCK_ROUND_TRIP_FAILED: "taking a lock on the share failed or locks do not exclude (refused)",
    LOCK_ROUND_TRIP_SLOW: "a lock round trip took more than half a keepalive period (warning)",
    FSYNC_ROUND_TRIP_FAILED: "writing and fsyncing a file on the share failed (refused)",
    FSYNC_ROUND_TRIP_SLOW: "an fsync round trip took more than one keepalive period (warning)",
    WRITABLE_BY_OTHERS: (
        "anyone on the host, or a user other than root and primacy's own, can write the share "
        "or a directory in it (warning)"
    ),
    NOT_A_DIRECTORY: (
        "a directory primacy keeps on the share is a symlink or another kind of file (refused)"
    ),
    LOCK_FILE_OPEN_TO_OTHERS: (
        "users outside primacy's owner and group may open the lock file, and so lock it (warning)"
    ),
    SHARE_RENAMABLE_BY_OTHERS: (
        "a directory above the share is writable by anyone without the sticky bit: anyone can "
        "rename the share away (warning)"
    ),
    LOCK_HELD_BY_A_STRANGER: (
        "the lock is held, but no live primacy node is registered as holding it (warning)"
    ),
    RUN_SHARE_REFUSED: "`primacy run` refused to start on a share the doctor refuses",
    RUN_SHARE_FORCED: "`primacy run --force-unsupported-share` started on a refused share anyway",
    RUN_SHARE_WARNINGS: "`primacy run` started on a share with doctor warnings",
    SYSTEMD_INSTALLED: "`primacy systemd install` copied a file",
    SYSTEMD_UNINSTALLED: "`primacy systemd uninstall` removed a file",
    SYSTEMD_SOURCE_MISSING: "the unit files to install were not found",
    SYSTEMD_BINARY_UNUSABLE: "the primacy binary the units would run is missing or unusable",
    ZOOKEEPER_SERVER_UNAVAILABLE: (
        "a ZooKeeper server grants no session: unreachable, or not in a quorum (warning)"
    ),
    ZOOKEEPER_NO_QUORUM: "no majority of the ZooKeeper servers serves: no quorum (refused)",
    ZOOKEEPER_SESSION_TIMEOUT_CLAMPED: (
        "the ZooKeeper ensemble grants another session timeout than the one asked for (warning)"
    ),
    ZOOKEEPER_SESSION_SHORTER_THAN_KEEPALIVE: (
        "the ZooKeeper session timeout granted is shorter than the keepalive plus its margin "
        "(refused)"
    ),
    ZOOKEEPER_OPEN_ACL: "znodes of the group let any client of the ensemble write (refused)",
    ZOOKEEPER_CREDENTIALS_UNUSABLE: (
        "the ZooKeeper credentials file (or a TLS file) is missing, open to others or malformed "
        "(refused)"
    ),
    ZOOKEEPER_NO_CREDENTIALS: (
        "no ZooKeeper credentials file: the group's znodes are open unless it has one (warning)"
    ),
    ZOOKEEPER_PLAINTEXT: "the connection to ZooKeeper is plaintext, without TLS (warning)",
    GROUP_SETTINGS_UNREADABLE: (
        "the share's group.json (how the group locks the share) cannot be read (refused)"
    ),
    GROUP_LOCK_METHOD_NOT_THE_PROFILES: (
        "the group's recorded lock method is not the one the filesystem's profile recommends "
        "(warning)"
    ),
    SHARE_UNUSABLE_BY_SERVICE_USER: (
        "a file or directory on the share that the service user cannot use: its owner or mode "
        "(another user wrote it); no node claims an epoch until it is fixed (refused)"
    ),
    SERVICE_USER_UNKNOWN: (
        "the service user to check the share's ownership for is not known on this host (warning)"
    ),
}
