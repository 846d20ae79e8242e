"""The server: REST (uvicorn) and gRPC (grpc.aio) on one event loop, over one
set of :class:`Handlers`.  Binds 127.0.0.1 unless told otherwise; any other
address needs a bearer token."""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Callable

import uvicorn

from nnrt_core.errors import ConfigError
from nnrt_serve.handlers import Handlers
from nnrt_serve.repository import ModelRepository
from nnrt_serve.rest import RestOptions, create_app

__all__ = ["ServerOptions", "InferenceServer", "is_loopback", "TOKEN_ENV"]

log = logging.getLogger("nnrt.serve")
TOKEN_ENV = "NNRT_SERVE_TOKEN"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class ServerOptions:
    host: str = "127.0.0.1"
    http_port: int | None = 8000  #: None: no REST; 0: any free port
    grpc_port: int | None = 8001  #: None: no gRPC; 0: any free port
    token: str | None = None  #: bearer token; required for a non-loopback host
    max_request_bytes: int = 256 << 20
    exit_after: float | None = None  #: stop by itself after this many seconds (tests, benchmarks)
    on_listening: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)

    def check(self) -> None:
        if self.token is None:
            self.token = os.environ.get(TOKEN_ENV) or None
        if not is_loopback(self.host) and not self.token:
            raise ConfigError(f"binding {self.host!r} (not a loopback address) needs a bearer token: --token TOKEN "
                              f"or {TOKEN_ENV}; clients then send 'Authorization: Bearer TOKEN'")
        if self.http_port is None and self.grpc_port is None:
            raise ConfigError("nothing to serve: give an HTTP port, a gRPC port or both")
        if self.max_request_bytes < 1:
            raise ConfigError(f"max_request_bytes must be positive, got {self.max_request_bytes}")


class InferenceServer:
    """``await server.run()`` serves until :meth:`stop` (or ``exit_after``)."""

    def __init__(self, repository: ModelRepository, options: ServerOptions | None = None) -> None:
        self.options = options or ServerOptions()
        self.options.check()
        self.handlers = Handlers(repository)
        self.addresses: dict[str, Any] = {}
        self._stop: asyncio.Event | None = None

    def _http(self) -> tuple[uvicorn.Server, socket.socket]:
        o = self.options
        app = create_app(self.handlers, RestOptions(o.max_request_bytes, o.token))
        family = socket.AF_INET6 if ":" in o.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((o.host, o.http_port))
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2, h11_max_incomplete_event_size=64 << 10)
        self.addresses["http"] = f"http://{o.host}:{sock.getsockname()[1]}"
        self.addresses["http_port"] = sock.getsockname()[1]
        return uvicorn.Server(config), sock

    def _grpc(self) -> Any:
        """The grpc.aio server (its stubs imported only now: a process that
        holds another copy of the protocol's protobuf names, e.g.
        tritonclient.grpc's, can still use the REST server)."""
        import grpc

        from nnrt_serve.grpc_service import add_to_server, grpc_options

        o = self.options
        server = grpc.aio.server(options=grpc_options(o.max_request_bytes))
        add_to_server(self.handlers, server, o.token)
        port = server.add_insecure_port(f"{o.host}:{o.grpc_port}")
        if port == 0:
            raise ConfigError(f"cannot bind gRPC to {o.host}:{o.grpc_port}")
        self.addresses["grpc"] = f"{o.host}:{port}"
        self.addresses["grpc_port"] = port
        return server

    async def run(self) -> None:
        self._stop = asyncio.Event()
        tasks, grpc_server = [], None
        http = None
        if self.options.http_port is not None:
            http, sock = self._http()
            tasks.append(asyncio.create_task(http.serve(sockets=[sock])))
        if self.options.grpc_port is not None:
            grpc_server = self._grpc()
            await grpc_server.start()
        if self.options.on_listening:
            self.options.on_listening(dict(self.addresses))
        loading = asyncio.create_task(self._load())
        stopping = asyncio.create_task(self._stop.wait())
        try:  # until stop(), exit_after, or uvicorn ending by itself (a signal)
            done, _ = await asyncio.wait([stopping, *tasks], timeout=self.options.exit_after,
                                         return_when=asyncio.FIRST_COMPLETED)
            if not done:
                log.warning("nnrt serve: stopping after %s s (exit_after)", self.options.exit_after)
        finally:
            stopping.cancel()
            loading.cancel()
            if http is not None:
                http.should_exit = True
            if grpc_server is not None:
                await grpc_server.stop(1.0)
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.handlers.close()

    async def _load(self) -> None:
        await self.handlers.load()
        for m in self.handlers.repository.models.values():
            log.warning("nnrt serve: model %r version %s %s in %.2f s%s", m.name, m.version, m.state.lower(),
                        m.load_seconds, f" ({m.reason})" if m.reason else "")

    def stop(self) -> None:
        """Stop serving (from the server's loop)."""
        if self._stop is not None:
            self._stop.set()
