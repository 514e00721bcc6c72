"""Message ids: the broker's own (unguessable), and the journal's for a client's (per login).

A message id is how the journal drops a resend (a SEND of an id the destination
already holds is receipted, not stored again: docs/stomp.md, "Resends"). So an id
one sender can predict or choose must never stand for another sender's message,
or the first could make the second's receipted SENDs vanish (issue 27):

- An id the broker makes (a SEND without ``message-id``) is new by construction:
  never checked as a resend, and random (128 bits from ``secrets``), so nobody
  can send it first.
- An id a logged-in client chooses is journaled as ``<login>/<id>``. Login names
  hold no ``/`` (``users.USER_NAME``), so two logins never share a journal id, and
  the journal's records keep the scope: a new master's dedupe window, rebuilt from
  them, drops the same resends. The client's own id travels in the record's
  headers as ``message-id`` and is what consumers see. Without a users file the id
  is journaled as the client gave it: any client may then receive and acknowledge
  any message, so there is no one to keep apart (docs/safety.md).
"""

from __future__ import annotations

import secrets

# The stored header that holds a client's own id when the journal's id is scoped.
CLIENT_ID_HEADER = "message-id"


def generated_id(node_id: str, epoch: int) -> str:
    """A fresh id for a SEND without one; its node and epoch say where it came from."""
    return f"ID:{node_id}-{epoch}-{secrets.token_hex(16)}"


def journal_id(login: str | None, client_id: str) -> str:
    """The id the journal keeps for ``client_id`` sent by ``login`` (None: no users file)."""
    return client_id if login is None else f"{login}/{client_id}"
