"""Stable message codes the command line prints (PRIMACY-2xxx); never renumber them.

One declaration per code: the constant, and its meaning in ``TITLES`` (the
operator guide's table repeats it, ``tests/test_message_codes.py`` checks both).
"""

from __future__ import annotations

LAYER = "command line"
NUMBERS = range(2000, 3000)
"""Where a new command-line code takes its number; 2006 is the node's (an edited config
file rejected, ``supervisor/codes.py``)."""

BAD_USAGE = "PRIMACY-2001"
SHARE_UNUSABLE = "PRIMACY-2002"
CANNOT_LISTEN = "PRIMACY-2003"
STATUS_UNREADABLE = "PRIMACY-2004"
TOKEN_FILE_REFUSED = "PRIMACY-2005"
ADMIN_COMMAND_FAILED = "PRIMACY-2007"
DESCRIPTORS_LOW = "PRIMACY-2008"
STOMP_OPEN = "PRIMACY-2009"
USERS_FILE_REFUSED = "PRIMACY-2010"
TLS_FILES_REFUSED = "PRIMACY-2011"
CONSUMED_FEWER = "PRIMACY-2012"
# How a node reaches its ZooKeeper ensemble and who it is there (docs/operator-guide.md,
# "ZooKeeper access").
ZOOKEEPER_OPEN_ACL_REFUSED = "PRIMACY-2040"
ZOOKEEPER_ACCESS_REFUSED = "PRIMACY-2041"
ZOOKEEPER_NOT_ADMITTED = "PRIMACY-2042"
ZOOKEEPER_OPEN_ACL = "PRIMACY-2043"
ZOOKEEPER_ACL_TIGHTENED = "PRIMACY-2044"
ZOOKEEPER_PLAINTEXT = "PRIMACY-2045"
GROUP_SETTINGS_DIFFER = "PRIMACY-2060"
GROUP_SETTINGS_UNREADABLE = "PRIMACY-2061"
GROUP_SETTINGS_ADOPTED = "PRIMACY-2062"
REPLAY_NEEDS_SPARK = "PRIMACY-2701"
REPLAY_NEEDS_JAVA = "PRIMACY-2702"
REPLAY_BAD_ARGUMENT = "PRIMACY-2703"
REPLAY_SHARE_NOT_READABLE = "PRIMACY-2704"
REPLAY_OUTPUT_BUSY = "PRIMACY-2705"

TITLES = {
    BAD_USAGE: "bad command line or configuration (exit 2)",
    SHARE_UNUSABLE: (
        "the share is unusable: missing, not a directory, not writable, or its locks do not exclude"
    ),
    CANNOT_LISTEN: "the HTTP address cannot be listened on (exit 4)",
    STATUS_UNREADABLE: "`primacy status` cannot read the node or the share",
    TOKEN_FILE_REFUSED: "the admin token file is refused (exit 2)",
    ADMIN_COMMAND_FAILED: "an admin command failed (switchover, pause, resume)",
    DESCRIPTORS_LOW: (
        "the open-file limit is below what the listeners need; max_connections and "
        "http_max_connections are lowered"
    ),
    STOMP_OPEN: "the STOMP connector lets every client in: no users file (warning)",
    USERS_FILE_REFUSED: "the STOMP users file is refused (exit 2)",
    TLS_FILES_REFUSED: "a TLS certificate, key or CA file is refused (exit 2)",
    CONSUMED_FEWER: "`primacy consume` received fewer messages than --count (exit 5)",
    ZOOKEEPER_OPEN_ACL_REFUSED: (
        "no zookeeper_credentials_file: the group's znodes would be open to every client of "
        "the ensemble (exit 2; zookeeper_allow_open_acl = true runs anyway)"
    ),
    ZOOKEEPER_ACCESS_REFUSED: "the ZooKeeper credentials file or a TLS file is refused (exit 2)",
    ZOOKEEPER_NOT_ADMITTED: (
        "the group's znodes belong to another ZooKeeper identity than the credentials (exit 2)"
    ),
    ZOOKEEPER_OPEN_ACL: (
        "the group's znodes are open to every client of the ensemble: "
        "zookeeper_allow_open_acl = true (warning)"
    ),
    ZOOKEEPER_ACL_TIGHTENED: "open znodes of the group were given the group's ACL (warning)",
    ZOOKEEPER_PLAINTEXT: (
        "the connection to ZooKeeper is plaintext: no zookeeper_tls_ca_file (warning)"
    ),
    GROUP_SETTINGS_DIFFER: (
        "this node's lock_method, coordination or zookeeper_path differs from what the group "
        "recorded on the share (group.json): it would not see the group's lock (exit 2)"
    ),
    GROUP_SETTINGS_UNREADABLE: "the share's group.json cannot be read as group settings (exit 2)",
    GROUP_SETTINGS_ADOPTED: (
        "the node follows the lock method the group recorded (its own was left at the default)"
    ),
    REPLAY_NEEDS_SPARK: "the replay needs the spark extra (exit 1)",
    REPLAY_NEEDS_JAVA: "the replay needs Java 17 (exit 1)",
    REPLAY_BAD_ARGUMENT: "a replay argument is invalid (exit 2); Spark did not start",
    REPLAY_SHARE_NOT_READABLE: (
        "an executor cannot read the share: not mounted at the driver's path there (exit 1)"
    ),
    REPLAY_OUTPUT_BUSY: "another replay is writing the same --out (exit 1); Spark did not start",
}
