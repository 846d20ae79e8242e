"""The protocol over REST: a Starlette app (served by uvicorn).

Every error is the protocol's ``{"error": message}`` with its HTTP status;
no route lets an exception reach the framework (no 500 with a traceback)."""
from __future__ import annotations

import asyncio
import hmac
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nnrt_serve.errors import ClientGone, PayloadTooLarge, ServeError, Unauthorized, as_serve_error
from nnrt_serve.handlers import Handlers
from nnrt_serve.metrics import CONTENT_TYPE_LATEST
from nnrt_serve.rest_codec import HEADER_LENGTH, decode_request, decompress, encode_result

__all__ = ["create_app", "RestOptions"]

log = logging.getLogger("nnrt.serve")


@dataclass(frozen=True)
class RestOptions:
    max_request_bytes: int = 256 << 20  #: the largest request body (after decompression)
    token: str | None = None  #: bearer token every route but health needs


def _error(e: BaseException) -> JSONResponse:
    err = as_serve_error(e)
    if err.status >= 500 and not isinstance(e, ServeError):
        log.error("request failed: %s", err)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(err, Unauthorized) else None
    return JSONResponse({"error": str(err)}, status_code=err.status, headers=headers)


def _guarded(fn: Callable[[Request], Awaitable[Response]], token: str | None, public: bool = False):
    async def endpoint(request: Request) -> Response:
        try:
            if token is not None and not public:
                given = request.headers.get("authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    raise Unauthorized("this server needs 'Authorization: Bearer <token>'")
            return await fn(request)
        except Exception as e:  # every failure becomes the protocol's error answer
            return _error(e)
    return endpoint


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body of {declared} bytes is over the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _watching_client(request: Request, work: Awaitable[Any]) -> Any:
    """``work``'s result; cancelled (and :class:`ClientGone`) when the client goes away first."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_until_disconnect(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        raise ClientGone("the client went away")
    return task.result()


def create_app(handlers: Handlers, options: RestOptions | None = None) -> Starlette:
    opts = options or RestOptions()
    v = lambda request: request.path_params.get("version")  # noqa: E731

    async def live(request: Request) -> Response:
        return JSONResponse({"live": True})

    async def ready(request: Request) -> Response:
        ok = handlers.server_ready()
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    async def server_meta(request: Request) -> Response:
        return JSONResponse(handlers.server_metadata())

    async def model_meta(request: Request) -> Response:
        return JSONResponse(handlers.model_metadata(request.path_params["name"], v(request)))

    async def model_ready(request: Request) -> Response:
        name = request.path_params["name"]
        ok = handlers.model_ready(name, v(request))
        return JSONResponse({"name": name, "ready": ok}, status_code=200 if ok else 503)

    async def model_config(request: Request) -> Response:
        return JSONResponse(handlers.model_config(request.path_params["name"], v(request)))

    async def placement(request: Request) -> Response:
        return JSONResponse(handlers.placement(request.path_params["name"], v(request)))

    async def metrics(request: Request) -> Response:
        return Response(handlers.metrics.text(), media_type=CONTENT_TYPE_LATEST)

    async def infer(request: Request) -> Response:
        name = request.path_params["name"]
        handlers.repository.get(name, v(request))  # 404 before reading a body for nobody
        limit = opts.max_request_bytes
        try:
            body = decompress(await _read_body(request, limit), request.headers.get("content-encoding"), limit)
            req = decode_request(body, request.headers.get(HEADER_LENGTH), name, v(request),
                                 handlers.tensor_limit(name))
        except Exception as e:
            raise handlers.refused(name, "http", e) from None
        result = await _watching_client(request, handlers.infer(req, "http"))
        payload, header_len = encode_result(result, req.parameters)
        if header_len is None:
            return Response(payload, media_type="application/json")
        return Response(payload, media_type="application/octet-stream",
                        headers={"Inference-Header-Content-Length": str(header_len)})

    g = lambda fn, public=False: _guarded(fn, opts.token, public)  # noqa: E731
    routes = [
        Route("/v2/health/live", g(live, True)), Route("/v2/health/ready", g(ready, True)),
        Route("/v2", g(server_meta)), Route("/metrics", g(metrics)),
    ]
    for base in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
        routes += [Route(base, g(model_meta)), Route(base + "/ready", g(model_ready)),
                   Route(base + "/config", g(model_config)), Route(base + "/placement", g(placement)),
                   Route(base + "/infer", g(infer), methods=["POST"])]
    return Starlette(routes=routes, exception_handlers={HTTPException: _no_route})


async def _no_route(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    return JSONResponse({"error": f"no route {request.method} {request.url.path} ({getattr(exc, 'detail', exc)})"},
                        status_code=status)
