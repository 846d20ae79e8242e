"""The protocol over REST: a Starlette app (served by uvicorn), with the
infer route answered in front of it (:mod:`nnrt_serve.rest_infer`).

Every error is the protocol's ``{"error": message}`` with its HTTP status;
no route lets an exception reach the framework (no 500 with a traceback)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nnrt_serve.auth import expected_bearer, require_bearer
from nnrt_serve.errors import ServeError, Unauthorized, as_serve_error
from nnrt_serve.handlers import Handlers
from nnrt_serve.metrics import CONTENT_TYPE_LATEST
from nnrt_serve.rest_infer import InferRoute

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
    bearer = None if public else expected_bearer(token)

    async def endpoint(request: Request) -> Response:
        try:
            require_bearer(request.headers.get("authorization", ""), bearer)
            return await fn(request)
        except Exception as e:  # every failure becomes the protocol's error answer
            return _error(e)
    return endpoint


class _InferEndpoint:
    """The infer route inside the Starlette app (reached when :class:`InferRoute` is not in front of it)."""

    def __init__(self, route: InferRoute) -> None:
        self.route = route

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        params = scope["path_params"]
        await self.route.infer(scope, receive, send, params["name"], params.get("version"))


def create_app(handlers: Handlers, options: RestOptions | None = None) -> InferRoute:
    """The REST app: :class:`~nnrt_serve.rest_infer.InferRoute` answering the infer route, in front of the
    Starlette app of every route (``.app``)."""
    opts = options or RestOptions()
    route = InferRoute(handlers, None, opts.max_request_bytes, opts.token, _error)
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

    g = lambda fn, public=False: _guarded(fn, opts.token, public)  # noqa: E731
    routes = [
        Route("/v2/health/live", g(live, True)), Route("/v2/health/ready", g(ready, True)),
        Route("/v2", g(server_meta)), Route("/metrics", g(metrics)),
    ]
    for base in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
        routes += [Route(base, g(model_meta)), Route(base + "/ready", g(model_ready)),
                   Route(base + "/config", g(model_config)), Route(base + "/placement", g(placement)),
                   Route(base + "/infer", _InferEndpoint(route), methods=["POST"])]
    route.app = Starlette(routes=routes, exception_handlers={HTTPException: _no_route})
    return route


async def _no_route(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    return JSONResponse({"error": f"no route {request.method} {request.url.path} ({getattr(exc, 'detail', exc)})"},
                        status_code=status)
