"""What the HTTP endpoint takes from a client before any handler runs: little, and not for long.

An ASGI middleware in front of the application. The endpoint faces untrusted
networks (load balancers, monitoring, anyone who can reach the port), and it
runs in the supervisor's process, so one request must not be able to tie up
memory or CPU the lease checks need:

- admin requests are authorized from their headers *before* their body is read
  (a 200 MB body to ``POST /switchover`` used to be parsed, then refused);
- every body is limited to ``MAX_BODY_BYTES``: a larger ``Content-Length`` is
  answered 413 at once, and a chunked body is cut off at the limit;
- a body must arrive whole within ``BODY_TIMEOUT_S`` (408), however it is chunked
  (it was per chunk: a byte every 4 s kept a request open 22 s);
- a client that goes away before its body is complete is not answered, and nothing
  runs for it (the application used to see an empty body).

uvicorn itself bounds header size (h11) and idle keep-alive connections; the
protocol (``http_protocol.py``) bounds connections per network and the time a
whole request may take.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from primacy.api.admin import token_matches

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 4096  # the largest admin body is {"to": "<node id>"}
BODY_TIMEOUT_S = 5.0
ADMIN_PATHS = frozenset({"/switchover", "/pause", "/resume", "/priority"})


_TOO_LARGE = {"error": f"request bodies are limited to {MAX_BODY_BYTES} bytes"}
Refusal = tuple[int, dict[str, str], list[tuple[bytes, bytes]]]


class _BodyTooLarge(Exception):
    pass


class _ClientGone(Exception):
    pass


class RequestGuard:
    """Refuse oversized, slow and unauthorized requests before the application reads them."""

    def __init__(self, app: App, admin_token: str | None) -> None:
        self._app = app
        self._token = admin_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        if scope["path"] in ADMIN_PATHS and scope["method"] not in ("GET", "HEAD"):
            refusal = self._authorize(headers.get(b"authorization"))
            if refusal is not None:
                await _reply(send, *refusal)
                return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            await _reply(send, 413, _TOO_LARGE)
            return
        try:
            body = await _read_body(receive)
        except _BodyTooLarge:
            await _reply(send, 413, _TOO_LARGE)
            return
        except TimeoutError:
            await _reply(send, 408, {"error": "the request body came too slowly"})
            return
        except _ClientGone:
            return  # nobody to answer, and a half-sent admin request must not act
        replayed = False

        async def replay() -> Message:
            # The whole (small) body at once; after it, whatever the server says next
            # (a disconnect), as the application expects.
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self._app(scope, replay, send)

    def _authorize(self, authorization: bytes | None) -> Refusal | None:
        if self._token is None:
            return (404, {"detail": "Not Found"}, [])  # admin is off: the routes do not exist
        supplied = authorization.decode("latin-1") if authorization else None
        verdict = token_matches(self._token, supplied)
        if verdict is None:
            challenge = [(b"www-authenticate", b"Bearer")]
            return (401, {"error": "a bearer token is required"}, challenge)
        if not verdict:
            return (403, {"error": "the token is not valid"}, [])
        return None


async def _read_body(receive: Receive) -> bytes:
    """The whole body, at most MAX_BODY_BYTES of it, all within BODY_TIMEOUT_S."""
    parts: list[bytes] = []
    size = 0
    async with asyncio.timeout(BODY_TIMEOUT_S):
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _ClientGone
            part = message.get("body", b"")
            size += len(part)
            if size > MAX_BODY_BYTES:
                raise _BodyTooLarge
            parts.append(part)
            if not message.get("more_body", False):
                return b"".join(parts)


async def _reply(
    send: Send,
    status: int,
    body: dict[str, str],
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
