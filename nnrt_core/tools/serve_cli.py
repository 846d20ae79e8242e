"""``nnrt serve --model-repository DIR``: an Open Inference Protocol (KServe v2)
server over REST and gRPC (registered by ``nnrt_core.tools.cli``).  The
server lives in the optional ``nnrt_serve`` package (``pip install
./plugins/serve``), found through the ``nnrt.commands`` entry point
``serve``: the core never imports a web framework."""
from __future__ import annotations

import argparse
from typing import Any, Callable

from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError

__all__ = ["add_serve_parser", "serve_command", "SERVE_INSTALL_HINT"]

SERVE_INSTALL_HINT = "install ./plugins/serve (pip install ./plugins/serve: Starlette, uvicorn, grpcio)"


def serve_command() -> Callable[[argparse.Namespace, ScheduleConfig], int]:
    """The installed ``serve`` command, or a :class:`ConfigError` saying how to install it."""
    from importlib import metadata

    eps = [ep for ep in metadata.entry_points(group="nnrt.commands") if ep.name == "serve"]
    if not eps:
        raise ConfigError(f"nnrt serve needs the nnrt-serve package, which is not installed: {SERVE_INSTALL_HINT}")
    try:
        return eps[0].load()
    except ImportError as e:
        raise ConfigError(f"nnrt serve failed to import its server ({e}): {SERVE_INSTALL_HINT}") from e


def _port(text: str) -> int | None:
    """A port number; 0: any free port; 'off': not served."""
    if text.lower() in ("off", "none", "-1"):
        return None
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535 or 'off', got {text!r}")
    return port


def add_serve_parser(sub: "argparse._SubParsersAction", add_config_flags: Callable[[Any], None],
                     config_from_args: Callable[[argparse.Namespace], ScheduleConfig]) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve a model repository over the Open Inference Protocol (REST + gRPC)",
                       description="Serve every model of a repository folder (one model per subfolder, an "
                                   "optional nnrt.toml each) over the Open Inference Protocol v2 (KServe, Triton's "
                                   "clients), REST and gRPC, with dynamic batching and /metrics. The config flags "
                                   "are every model's defaults; a model's nnrt.toml overrides them. Needs "
                                   "./plugins/serve. See docs/serving.md.")
    p.add_argument("--model-repository", required=True, metavar="DIR")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs --token)")
    p.add_argument("--http-port", type=_port, default=8000, help="REST port (default 8000; 0: any; off)")
    p.add_argument("--grpc-port", type=_port, default=8001, help="gRPC port (default 8001; 0: any; off)")
    p.add_argument("--token", help="bearer token every request but health needs (default: $NNRT_SERVE_TOKEN); "
                                   "required when --host is not a loopback address")
    p.add_argument("--max-request-bytes", type=int, default=256 << 20,
                   help="the largest request body (default 256 MiB); each tensor is also held to its model's "
                        "memory budget (max_tensor_bytes)")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="the server's event loop (default auto: uvloop when installed, else asyncio's)")
    p.add_argument("--exit-after", type=float, metavar="SECONDS", help="stop by itself after SECONDS")
    p.add_argument("--ray", action="store_true", help="serve through Ray Serve replicas (nnrt_serve.ray_serve)")
    p.add_argument("--replicas", type=int, default=2, help="with --ray: replicas per model (default 2)")
    add_config_flags(p)
    p.set_defaults(func=lambda args: serve_command()(args, config_from_args(args)))
    return p
