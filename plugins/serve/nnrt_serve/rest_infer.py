"""The REST ``infer`` route as a bare ASGI app in front of the Starlette app.

``POST /v2/models/{m}[/versions/{v}]/infer`` is the one route every request
of a loaded server takes; through Starlette it paid its middleware stack,
route matching, a ``Request``/``Response`` per request and a second task per
request (the work beside a disconnect watcher).  :class:`InferRoute` answers
it from the ASGI messages directly, with the same checks, limits and
answers, in the request's own task (one watcher task waits for the client
going away and cancels it); every other request, and every error answer,
goes through the Starlette app as before."""
from __future__ import annotations

import asyncio
import re
from typing import Any, Awaitable, Callable

from starlette.datastructures import Headers

from nnrt_serve.auth import expected_bearer, require_bearer
from nnrt_serve.errors import ClientGone, PayloadTooLarge
from nnrt_serve.handlers import Handlers
from nnrt_serve.rest_codec import HEADER_LENGTH, decode_request, decompress, encode_result

__all__ = ["InferRoute", "INFER_PATH", "read_body", "watching_client"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the infer route (Starlette's ``{name}`` matches ``[^/]+`` too)
INFER_PATH = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer")
_JSON = [(b"content-type", b"application/json")]
_BINARY = [(b"content-type", b"application/octet-stream")]


def route_path(scope: Scope) -> str:
    """The path the routes see: ``path`` without the ``root_path`` a proxy mounted the app under."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


async def read_body(receive: Receive, headers: Headers, limit: int) -> bytes:
    """The request body, refused past ``limit`` bytes (the declared length before reading, then the stream)."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body of {declared} bytes is over the limit of {limit} bytes")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone("the client went away while sending its request")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def watching_client(receive: Receive, work: Awaitable[Any]) -> Any:
    """``await work`` in this task; when the client goes away first it is cancelled and
    :class:`ClientGone` raised (the body must have been read: ``receive`` then only tells the disconnect)."""
    task = asyncio.current_task()
    gone = False

    async def watch() -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass
        gone = True
        task.cancel()

    watcher = asyncio.ensure_future(watch())
    try:
        return await work
    except asyncio.CancelledError:
        if not gone:
            raise
        task.uncancel()
        raise ClientGone("the client went away") from None
    finally:
        watcher.cancel()


class InferRoute:
    """ASGI app: the infer route answered here, anything else by ``app`` (the Starlette app)."""

    def __init__(self, handlers: Handlers, app: ASGIApp, max_request_bytes: int, token: str | None,
                 error_app: Callable[[BaseException], ASGIApp]) -> None:
        self.handlers, self.app, self.limit, self.token = handlers, app, max_request_bytes, token
        self.error_app = error_app  #: the protocol's error answer of an exception, as an ASGI app
        self._bearer = expected_bearer(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            found = INFER_PATH.fullmatch(route_path(scope))
            if found is not None:
                return await self.infer(scope, receive, send, found.group(1), found.group(2))
        await self.app(scope, receive, send)

    async def infer(self, scope: Scope, receive: Receive, send: Send, name: str, version: str | None) -> None:
        headers = Headers(scope=scope)
        try:
            payload, header_len = await self._answer(headers, receive, name, version)
        except Exception as e:  # every failure becomes the protocol's error answer
            return await self.error_app(e)(scope, receive, send)
        extra = _JSON if header_len is None else [*_BINARY, (b"inference-header-content-length",
                                                            str(header_len).encode())]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(payload)).encode()), *extra]})
        await send({"type": "http.response.body", "body": payload})

    async def _answer(self, headers: Headers, receive: Receive, name: str, version: str | None
                      ) -> tuple[bytes, int | None]:
        require_bearer(headers.get("authorization", ""), self._bearer)
        self.handlers.repository.get(name, version)  # 404 before reading a body for nobody
        try:
            body = decompress(await read_body(receive, headers, self.limit), headers.get("content-encoding"),
                              self.limit)
            req = decode_request(body, headers.get(HEADER_LENGTH), name, version, self.handlers.tensor_limit(name))
        except Exception as e:
            raise self.handlers.refused(name, "http", e) from None
        result = await watching_client(receive, self.handlers.infer(req, "http"))
        return encode_result(result, req.parameters)
