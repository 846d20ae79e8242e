"""The body of ``nnrt serve`` (the core's CLI finds it through the
``nnrt.commands`` entry point ``serve``) and the ``nnrt-serve`` script."""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any, Sequence

from nnrt_core import ScheduleConfig
from nnrt_serve.process import LISTENING
from nnrt_serve.repository import ModelRepository
from nnrt_serve.server import InferenceServer, ServerOptions

__all__ = ["run_command", "main"]


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
    asyncio.run(_serve(InferenceServer(repository, options)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``nnrt-serve ARGS`` is ``nnrt serve ARGS``."""
    from nnrt_core.tools.cli import main as nnrt_main

    return nnrt_main(["serve", *(sys.argv[1:] if argv is None else argv)])
