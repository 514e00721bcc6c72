"""The share port on a ZooKeeper ensemble: the lock a session lease, the epoch a CAS counter.

The journal stays on the shared directory (``store/``); what moves to
ZooKeeper is who is master, and the fencing token every journal write is
checked against. Under the group's path (``zookeeper_path``):

- ``lock``: an ephemeral znode, so the lock is a lease bound to this node's
  session: the ensemble deletes it when the session expires (a dead, frozen or
  cut-off node), and nothing else takes it away. Its data is the session id.
- ``holder``: the holder record (``HolderInfo``), a persistent znode, so the
  next claimant still reads "released" after the lock itself is gone.
- ``epoch`` and ``epochs/N``: the counter and the records of the claims
  (``share/zookeeper_epochs.py`` says how a claim, the lease check's question
  and the epoch floor rest on quorum operations).
- ``nodes/<node-id>``, ``paused``, ``switchover``: the registry and markers.

Every request waits ``request_timeout_s`` at most; a request that fails or
times out raises ``OSError``, as a hung or unreachable share does, and a lock
check on a connection that is not CONNECTED (kazoo's SUSPENDED, LOST) fails at
once: a lease is confirmed only by the ensemble's answer, never assumed.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState  # type: ignore[import-untyped]
from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

from primacy.share.port import Capabilities, LockLost
from primacy.share.records import (
    MAX_RECORD_BYTES,
    EpochRecord,
    HolderInfo,
    NodeEntry,
    PauseMarker,
    Switchover,
    parse_epoch_name,
)
from primacy.share.zookeeper_access import ZooKeeperAccess, secure_group
from primacy.share.zookeeper_epochs import EpochCounter
from primacy.share.zookeeper_watch import ZooKeeperWatch, watch_granted_timeout

log = logging.getLogger("primacy.share.zookeeper")

DEFAULT_PATH = "/primacy"
# kazoo's connection states, as /status and the metrics name them.
SESSION_STATES = ("connecting", "connected", "suspended", "lost", "closed")

StateListener = Callable[[str], None]


class ZooKeeperShare:
    """One node's handle on a group's znodes (see ``share/port.py`` for the contract)."""

    def __init__(
        self,
        hosts: str,
        path: str = DEFAULT_PATH,
        session_timeout_s: float = 10.0,
        request_timeout_s: float | None = None,
        on_session_state: StateListener | None = None,
        on_planted_epoch: Callable[[int], None] | None = None,
        access: ZooKeeperAccess | None = None,
        secure_group: bool = True,
    ) -> None:
        self.hosts = hosts
        # Who this client is (digest credentials: every znode it creates carries their ACL)
        # and whether it speaks TLS; anonymous and plaintext without. A node's handle gives
        # open group znodes the ACL (``secure_group``); a command's leaves them be.
        self.access = access or ZooKeeperAccess()
        self._secure_on_start = secure_group and self.access.authenticated
        self.tightened: list[str] = []  # group znodes found open and given the group's ACL
        self.path = path.rstrip("/") or "/"
        self.request_timeout_s = request_timeout_s or session_timeout_s
        self._on_session_state = on_session_state
        self._session_state = "connecting"
        self._lock_session: int | None = None
        self._ensured = False
        self.client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            # Reconnect for ever (a new session once the old one expired); a request never
            # retries on its own: a lease check that cannot be answered at once has failed.
            connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
            command_retry=None,
            **self.access.kazoo_options(),
        )
        self._epochs = EpochCounter(
            self.client, self._znode, self._wait, self.request_timeout_s, on_planted_epoch
        )
        self._granted_timeout_s = watch_granted_timeout(self.client)
        self.client.add_listener(self._state_changed)
        self.client.start_async()

    # ---- the session ---------------------------------------------------------

    @property
    def coordination(self) -> str:
        return "zookeeper"

    @property
    def capabilities(self) -> Capabilities:
        # A stalled holder's lock goes when its session expires: nothing to replace.
        return Capabilities(coordination="zookeeper", has_session=True, replaces_lock=False)

    @property
    def session_state(self) -> str:
        """connecting, connected, suspended (connection lost, session may live), lost
        (the session expired: every ephemeral znode of it is gone), or closed."""
        return self._session_state

    @property
    def negotiated_session_timeout_s(self) -> float | None:
        """The session timeout the ensemble granted the last session (it clamps what was asked
        for), None before the first."""
        return self._granted_timeout_s[-1] if self._granted_timeout_s else None

    def _state_changed(self, state: str) -> None:
        # On kazoo's event thread: record and tell, never block.
        name = {
            KazooState.CONNECTED: "connected",
            KazooState.SUSPENDED: "suspended",
            KazooState.LOST: "lost",
        }.get(state, str(state).lower())
        self._session_state = name
        if self._on_session_state is not None:
            self._on_session_state(name)

    def close(self) -> None:
        """End the session (its ephemeral lock goes with it) and stop kazoo's threads."""
        try:
            self.client.stop()
        finally:
            self.client.close()
            self._session_state = "closed"

    def _session_id(self) -> int | None:
        client_id = self.client.client_id
        return None if client_id is None else int(client_id[0])

    # ---- requests ------------------------------------------------------------

    def _wait(self, result: Any) -> Any:
        """The result of an async request, or OSError: failures of the ensemble read as I/O."""
        try:
            return result.get(timeout=self.request_timeout_s)
        except (NoNodeError, NodeExistsError, BadVersionError):
            raise
        except KazooTimeoutError as exc:
            raise OSError(errno.ETIMEDOUT, f"ZooKeeper did not answer: {exc}") from exc
        except NoAuthError as exc:
            raise PermissionError(
                errno.EACCES,
                "ZooKeeper refused the request (NoAuth): the znode's ACL does not admit "
                f"{self._identity_text()}",
            ) from exc
        except KazooException as exc:
            raise OSError(errno.EIO, f"ZooKeeper request failed: {exc!r}") from exc

    def _znode(self, *names: str) -> str:
        return "/".join([self.path.rstrip("/"), *names])

    def _identity_text(self) -> str:
        user = self.access.user
        return "an anonymous client" if user is None else f"the digest user {user!r}"

    def _ensure_tree(self) -> None:
        """The group's znodes, once per handle: parents, and the counter at 0, each created
        only if missing (a reader without credentials may not create, even what exists, and
        ZooKeeper checks that before it checks existence). Every create carries the access's
        ACL (kazoo's ``default_acl``, parents made by ``makepath`` too); with credentials,
        group znodes an earlier node left open are given it (``secure_group``)."""
        if self._ensured:
            return
        for name, value in (("", None), ("epochs", None), ("nodes", None), ("epoch", b"0")):
            znode = self._znode(name) if name else self.path
            if self._wait(self.client.exists_async(znode)) is not None:
                continue
            try:
                self._wait(self.client.create_async(znode, value or b"", makepath=True))
            except NodeExistsError:
                pass
        if self._secure_on_start:
            self.secure_group()
        self._ensured = True

    def secure_group(self) -> list[str]:
        """Give every group znode that lets anyone write the group's ACL (``secure_group`` of
        ``share/zookeeper_access.py``); PermissionError if one belongs to another identity.
        The znodes tightened are returned and kept in ``tightened``."""
        tightened = secure_group(self.client, self.access, self._znode, self._wait)
        self.tightened.extend(tightened)
        return tightened

    def group_exists(self) -> bool:
        """Whether a group has used this path: for readers, which must create nothing."""
        return self._wait(self.client.exists_async(self._znode("epoch"))) is not None

    def _read(self, *names: str) -> bytes | None:
        self._ensure_tree()
        try:
            data, _ = self._wait(self.client.get_async(self._znode(*names)))
        except NoNodeError:
            return None
        return bytes(data)

    def _caught_up(self) -> None:
        """Make the server this session reads from catch up with the leader (ZooKeeper's
        ``sync``): a plain read may come from a follower behind it, and the registry, the
        markers and the holder record are written through other nodes' sessions. A pause
        another node wrote a moment ago must read as paused here."""
        self._ensure_tree()
        self._wait(self.client.sync_async(self._znode()))

    def _write(self, value: bytes, *names: str) -> None:
        """Set a znode's data, creating it if needed."""
        self._ensure_tree()
        path = self._znode(*names)
        try:
            self._wait(self.client.set_async(path, value))
        except NoNodeError:
            try:
                self._wait(self.client.create_async(path, value))
            except NodeExistsError:
                self._wait(self.client.set_async(path, value))

    def _delete(self, *names: str) -> None:
        self._ensure_tree()
        try:
            self._wait(self.client.delete_async(self._znode(*names)))
        except NoNodeError:
            pass

    # ---- the lock ----------------------------------------------------------

    @property
    def lock_held(self) -> bool:
        return self._lock_session is not None

    def try_lock(self) -> bool:
        self._ensure_tree()
        session = self._session_id()
        if session is None or self.client.state != KazooState.CONNECTED:
            raise OSError(errno.ENOTCONN, f"not connected to ZooKeeper ({self._session_state})")
        lock = self._znode("lock")
        try:
            self._wait(self.client.create_async(lock, str(session).encode(), ephemeral=True))
        except NodeExistsError:
            stat = self._wait(self.client.exists_async(lock))
            # Still ours: a lock this session dropped while cut off (its delete never arrived).
            if stat is None or stat.ephemeralOwner != session:
                return False
        self._lock_session = session
        return True

    def check_lock(self) -> None:
        if self._lock_session is None:
            raise LockLost("the lock is not held")
        if self.client.state != KazooState.CONNECTED:
            raise LockLost(f"the ZooKeeper session is {self._session_state}, not connected")
        if self._session_id() != self._lock_session:
            raise LockLost("the ZooKeeper session that held the lock expired")
        try:
            stat = self._wait(self.client.exists_async(self._znode("lock")))
        except OSError as exc:
            raise LockLost(f"re-asserting the lock failed: {exc}") from exc
        if stat is None or stat.ephemeralOwner != self._lock_session:
            raise LockLost("the lock znode is gone or belongs to another session")

    def write_holder(self, holder: HolderInfo) -> None:
        self.check_lock()
        self._write(holder.to_bytes(), "holder")

    def read_holder(self) -> HolderInfo | None:
        self._caught_up()
        data = self._read("holder")
        return None if data is None else HolderInfo.from_bytes(data)

    def release_lock(self, node_id: str) -> None:
        try:
            self.check_lock()
            previous = self.read_holder()
            epoch = previous.epoch if previous is not None else None
            self._write(
                HolderInfo.for_this_process(node_id, epoch, released=True).to_bytes(), "holder"
            )
        except LockLost:
            pass
        finally:
            self.drop_lock()

    def replace_lock(self) -> bool:
        """Not offered: a stalled holder's lock goes when its session expires (the session
        timeout is the lease a crash waits out, and it is the operator's to choose)."""
        return False

    def drop_lock(self) -> None:
        session, self._lock_session = self._lock_session, None
        if session is None or self._session_id() != session:
            return  # never held, or the session that held it has expired: nothing to delete
        lock = self._znode("lock")
        try:
            stat = self._wait(self.client.exists_async(lock))
            if stat is not None and stat.ephemeralOwner == session:
                self._wait(self.client.delete_async(lock, version=stat.version))
        except (OSError, NoNodeError, BadVersionError) as exc:
            # Cut off: the lock goes when the session expires, or this node takes it again.
            log.debug("the lock znode was not deleted: %s", exc)

    # ---- epochs ------------------------------------------------------------

    def claim_epoch(self, record: EpochRecord) -> int:
        self._ensure_tree()
        return self._epochs.claim(record)

    def epoch_exists(self, epoch: int) -> bool:
        self._ensure_tree()
        return self._epochs.exists(epoch)

    def raise_counter(self, to_epoch: int, progress: Callable[[int], None] | None = None) -> int:
        """Bring the counter up to ``to_epoch``: ``primacy epochs raise`` (``EpochCounter``)."""
        self._ensure_tree()
        return self._epochs.raise_to(to_epoch, progress)

    def listed_epochs(self) -> list[int]:
        self._ensure_tree()
        names = self._wait(self.client.get_children_async(self._znode("epochs")))
        return [epoch for name in names if (epoch := parse_epoch_name(name)) is not None]

    def read_epoch(self, epoch: int) -> EpochRecord | None:
        try:
            data = self._read("epochs", str(epoch))
        except OSError:
            return None
        if data is None or len(data) > MAX_RECORD_BYTES:
            return None
        return EpochRecord.from_bytes(epoch, data)

    def rewrite_epoch(self, record: EpochRecord) -> None:
        self._ensure_tree()
        try:
            # One znode's data is replaced atomically: readers see the old or the new record.
            self._wait(
                self.client.set_async(self._znode("epochs", str(record.epoch)), record.to_bytes())
            )
        except NoNodeError:
            raise FileNotFoundError(
                errno.ENOENT, f"epoch {record.epoch} was never claimed"
            ) from None

    # ---- the registry and the group's markers ------------------------------

    def publish_node(self, entry: NodeEntry) -> None:
        if "/" in entry.node_id or entry.node_id in ("", ".", ".."):
            raise OSError(errno.EINVAL, f"{entry.node_id!r} cannot name a znode")
        self._write(json.dumps(entry.to_json(), sort_keys=True).encode(), "nodes", entry.node_id)

    def forget_node(self, node_id: str) -> None:
        if "/" in node_id or "\0" in node_id or node_id in ("", ".", ".."):
            raise ValueError(f"{node_id!r} cannot name a registry entry")
        self._delete("nodes", node_id)

    def node_entries(self) -> list[NodeEntry]:
        self._caught_up()
        found = []
        for name in sorted(self._wait(self.client.get_children_async(self._znode("nodes")))):
            raw = _json_object(self._read("nodes", name))
            entry = None if raw is None else NodeEntry.from_json(raw)
            if entry is not None:
                found.append(entry)
        return found

    def pause(self, marker: PauseMarker) -> None:
        self._write(json.dumps(marker.to_json()).encode(), "paused")

    def resume(self) -> None:
        self._delete("paused")

    def is_paused(self) -> bool:
        self._caught_up()
        return self._wait(self.client.exists_async(self._znode("paused"))) is not None

    def request_switchover(self, switchover: Switchover) -> None:
        self._write(json.dumps(switchover.to_json()).encode(), "switchover")

    def read_switchover(self) -> Switchover | None:
        try:
            self._caught_up()
            raw = _json_object(self._read("switchover"))
        except OSError:
            return None
        return None if raw is None else Switchover.from_json(raw, time.time())

    def clear_switchover(self) -> None:
        self._delete("switchover")

    # ---- hints -------------------------------------------------------------

    def watch(
        self,
        own_node_id: str,
        on_master_left: Callable[[], None],
        on_pause_changed: Callable[[], None],
    ) -> ZooKeeperWatch:
        return ZooKeeperWatch(
            self.client,
            self._znode("lock"),
            self._znode("paused"),
            on_master_left,
            on_pause_changed,
        )


def _json_object(data: bytes | None) -> dict[str, Any] | None:
    if data is None or len(data) > MAX_RECORD_BYTES:
        return None
    try:
        value = json.loads(data.decode())
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
