"""The body of ``nnrt serve`` (the core's CLI finds it through the
``nnrt.commands`` entry point ``serve``) and the ``nnrt-serve`` script."""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any, Callable, Sequence

from nnrt_core import ScheduleConfig
from nnrt_core.errors import ConfigError
from nnrt_serve.process import LISTENING
from nnrt_serve.repository import ModelRepository
from nnrt_serve.server import InferenceServer, ServerOptions

__all__ = ["run_command", "main", "event_loop_factory", "LOOPS"]

#: the event loops ``--loop`` names ("auto": uvloop when it is installed, else asyncio's own)
LOOPS = ("auto", "uvloop", "asyncio")


def event_loop_factory(name: str = "auto") -> Callable[[], asyncio.AbstractEventLoop]:
    """The factory of the server's event loop ``name`` (one of :data:`LOOPS`).  uvloop (libuv) does the
    loop's own work (polling, callbacks, socket reads and writes) in C; it is what uvicorn picks by itself
    when it is installed (``uvicorn[standard]``)."""
    if name not in LOOPS:
        raise ConfigError(f"--loop must be one of {', '.join(LOOPS)}, got {name!r}")
    if name != "asyncio":
        try:
            import uvloop
        except ImportError:
            if name == "uvloop":
                raise ConfigError("--loop uvloop: uvloop is not installed (pip install uvloop)") from None
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def _announce(addresses: dict[str, Any]) -> None:
    print(LISTENING + json.dumps(addresses), flush=True)


async def _serve(server: InferenceServer) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, server.stop)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            pass
    await server.run()


def run_command(args: argparse.Namespace, config: ScheduleConfig) -> int:
    """Serve the repository ``args`` names until a signal or ``--exit-after``."""
    repository = ModelRepository(args.model_repository, config)
    for folder, why in repository.problems.items():
        print(f"nnrt serve: folder {folder!r} is not served: {why}", file=sys.stderr)
    if args.ray:
        from nnrt_serve.ray_serve import run_ray_serve

        return run_ray_serve(repository, args)
    options = ServerOptions(args.host, args.http_port, args.grpc_port, args.token, args.max_request_bytes,
                            args.exit_after, on_listening=_announce)
    factory = event_loop_factory(getattr(args, "loop", "auto"))
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_serve(InferenceServer(repository, options)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``nnrt-serve ARGS`` is ``nnrt serve ARGS``."""
    from nnrt_core.tools.cli import main as nnrt_main

    return nnrt_main(["serve", *(sys.argv[1:] if argv is None else argv)])
