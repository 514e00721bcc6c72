"""STOMP 1.0 and 1.1 acknowledge a MESSAGE by its ``message-id``; the broker keeps 1.2's ack ids.

A connection of those versions remembers, per delivery, which ack id its
(subscription, message id) stands for, and forgets it once the delivery is
settled or its subscription ends. STOMP 1.2 clients name the ack id itself.
"""

from __future__ import annotations

from primacy.broker.frame_rules import required
from primacy.broker.frames import Frame


class LegacyAckIds:
    def __init__(self) -> None:
        self._ack_ids: dict[tuple[str, str], str] = {}

    def remember(self, subscription_id: str, message_id: str, ack_id: str) -> None:
        self._ack_ids[(subscription_id, message_id)] = ack_id

    def forget(self, subscription_id: str, message_id: str) -> None:
        self._ack_ids.pop((subscription_id, message_id), None)

    def forget_subscription(self, subscription_id: str) -> None:
        for key in [key for key in self._ack_ids if key[0] == subscription_id]:
            del self._ack_ids[key]

    def named_by(self, frame: Frame) -> str:
        """The ack id an ACK or NACK names by ``message-id`` (and ``subscription``, which 1.0
        may leave out); "" if it names no delivery of this connection."""
        message_id = required(frame, "message-id")
        wanted = frame.get("subscription")
        if wanted is not None and (wanted, message_id) in self._ack_ids:
            return self._ack_ids[(wanted, message_id)]
        if wanted is None:  # STOMP 1.0: the message id alone (one per destination)
            for (_, delivered_id), ack_id in self._ack_ids.items():
                if delivered_id == message_id:
                    return ack_id
        # Not delivered on this connection (say, before a failover): ignored, as an unknown
        # 1.2 ack id is. The message stays pending and is delivered again.
        return ""
