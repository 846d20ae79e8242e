"""Build a model once in a forked child process before building it here, so
that a native fault (a crash in onnx's C++ code or a backend's library on a
hostile model) refuses the model with :class:`ModelLoadError` instead of
killing the caller's process (``Session(..., isolate=True)``,
``compile_model(..., isolate=True)``)."""
from __future__ import annotations

import gc
import os
import signal
from typing import Any, Callable

from nnrt_core import errors
from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError, ModelLoadError, NnrtError

__all__ = ["ISOLATE_TIMEOUT", "build_isolated", "start_forked"]

#: seconds the child may take before the model is refused
ISOLATE_TIMEOUT = float(os.environ.get("NNRT_ISOLATE_TIMEOUT", 600))


def start_forked(proc: Any) -> None:
    """``proc.start()`` for a fork-context process, with every object of this
    process frozen out of the child's garbage collector (``gc.freeze``).  A
    forked child has one thread; if its collector finalized an inherited
    native object (an ONNX Runtime session in uncollected garbage), the
    destructor would wait forever on a condition variable that the parent's
    worker threads were waiting on when the fork happened."""
    gc.freeze()
    try:
        proc.start()
    finally:
        gc.unfreeze()


def _child(conn: Any, build: Callable[..., Any], model: Any, config: ScheduleConfig | None, registry: Any) -> None:
    try:
        build(model, config, registry)
        conn.send(("ok", "", ""))
    except NnrtError as e:
        conn.send(("nnrt", type(e).__name__, str(e)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which builds again and sees it
        conn.send(("other", type(e).__name__, str(e)))
    finally:
        conn.close()  # multiprocessing ends the forked child without running the parent's atexit handlers


def build_isolated(build: Callable[..., Any], model: Any, config: ScheduleConfig | None, registry: Any,
                   timeout: float | None = None) -> None:
    """Run ``build(model, config, registry)`` (``compile_model``) in a forked
    child and wait for it: returns when the
    child built it, raises the child's ``NnrtError`` (same type and message)
    when it refused it, :class:`ModelLoadError` when the child died (a
    signal) or ran past ``timeout`` seconds (default ``ISOLATE_TIMEOUT``)."""
    if not hasattr(os, "fork"):
        raise ConfigError("isolate=True needs os.fork (a POSIX system)")
    import multiprocessing as mp  # only for isolated builds

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, build, model, config, registry), daemon=True)
    start_forked(proc)
    send.close()
    limit = ISOLATE_TIMEOUT if timeout is None else timeout
    try:
        if not recv.poll(limit):
            proc.kill()
            raise ModelLoadError(f"building the model in an isolated process took over {limit:g} s; refused")
        try:
            kind, name, message = recv.recv()
        except EOFError:
            proc.join()
            code = proc.exitcode
            how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
            raise ModelLoadError(f"building the model crashed an isolated process ({how}): the model makes "
                                 "native code (onnx or a backend library) fail; refused") from None
    finally:
        recv.close()
        proc.join(5)
    if kind == "nnrt":
        cls = getattr(errors, name, None)
        raise (cls if isinstance(cls, type) and issubclass(cls, NnrtError) else ModelLoadError)(message)
