"""nnrt serve on Ray Serve: the same REST handlers as Ray Serve replicas.

The driver builds every model of the repository once and puts its compiled
session file into Ray's object store (``nnrt_ray.ship``, as ``nnrt batch``
does); each replica loads those files warm and serves the Open Inference
Protocol's REST routes (the Starlette app of :mod:`nnrt_serve.rest`) behind
Ray Serve's HTTP proxy.  Ray Serve restarts a replica that dies; its requests
in flight get an error answer from the proxy, never a hang.

    nnrt serve --ray --model-repository models/ --replicas 2 [--http-port 8000]

Needs ``pip install './plugins/serve[ray]'`` and ``./plugins/ray``.  gRPC is
not served on Ray (Ray Serve's gRPC proxy needs its own servicer functions)."""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnrt_core.errors import ConfigError
from nnrt_serve.handlers import Handlers
from nnrt_serve.process import LISTENING
from nnrt_serve.repository import ModelRepository, ServedModel
from nnrt_serve.rest import RestOptions, create_app
from nnrt_serve.server import ServerOptions
from nnrt_serve.settings import ServingSettings

__all__ = ["ModelSpec", "NnrtReplica", "ship_repository", "deployment", "run_ray_serve"]

try:
    from ray import serve
except ImportError as e:  # pragma: no cover - the ray extra is optional
    raise ConfigError(f"nnrt serve --ray needs Ray Serve ({e}): "
                      "pip install './plugins/serve[ray]' ./plugins/ray") from e


@dataclass
class ModelSpec:
    """One model as it travels to the replicas: its shipped session, names and settings."""

    name: str
    version: str
    file: str
    settings: ServingSettings
    shipped: Any  #: nnrt_ray.ShippedSession (the compiled file in the object store)


def ship_repository(repository: ModelRepository) -> list[ModelSpec]:
    """Build every model once here and put it into the object store."""
    from nnrt_ray import ship

    specs = []
    for m in repository.models.values():
        specs.append(ModelSpec(m.name, m.version, m.path.name, m.settings, ship(m.path, m.config)))
    return specs


@serve.ingress()
class NnrtReplica:
    """A Ray Serve replica: every model's session, loaded warm from the shipped files, behind the REST app."""

    def __init__(self, specs: list[ModelSpec], token: str | None, max_request_bytes: int) -> None:
        models = [ServedModel(s.name, s.version, Path(s.file), s.shipped.config, s.settings, loader=s.shipped.load)
                  for s in specs]
        self.handlers = Handlers(ModelRepository.of_models(".", models))
        self.handlers.repository.load_all()
        self.handlers.loaded()
        failed = {m.name: m.reason for m in models if not m.ready}
        if failed:
            raise ConfigError(f"the replica could not load {failed}")
        self.options = RestOptions(max_request_bytes, token)

    def __serve_build_asgi_app__(self) -> Any:
        return create_app(self.handlers, self.options)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def deployment(specs: list[ModelSpec], replicas: int, options: ServerOptions) -> Any:
    """The bound Ray Serve application: ``replicas`` of :class:`NnrtReplica`."""
    dep = serve.deployment(NnrtReplica, name="nnrt", num_replicas=replicas, max_ongoing_requests=64,
                           health_check_period_s=2, health_check_timeout_s=10, graceful_shutdown_timeout_s=2)
    return dep.bind(specs, options.token, options.max_request_bytes)


def run_ray_serve(repository: ModelRepository, args: argparse.Namespace) -> int:
    """``nnrt serve --ray``: start (or join, with ``RAY_ADDRESS``) Ray, serve,
    and block until a signal or ``--exit-after``."""
    import ray

    port = 8000 if args.http_port is None else args.http_port or _free_port(args.host)
    options = ServerOptions(args.host, port, None, args.token, args.max_request_bytes, args.exit_after)
    options.check()
    if args.replicas < 1:
        raise ConfigError(f"--replicas must be at least 1, got {args.replicas}")
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=False)
    else:  # a local instance where every replica fits (one CPU each)
        ray.init(num_cpus=max(os.cpu_count() or 1, args.replicas), include_dashboard=False, log_to_driver=False)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        specs = ship_repository(repository)
        serve.start(http_options={"host": options.host, "port": options.http_port})
        serve.run(deployment(specs, args.replicas, options), name="nnrt", route_prefix="/", blocking=False)
        print(LISTENING + json.dumps({"http": f"http://{options.host}:{options.http_port}",
                                      "http_port": options.http_port,
                                      "ray_address": ray.get_runtime_context().gcs_address,
                                      "replicas": args.replicas}), flush=True)
        stop.wait(options.exit_after)
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0
