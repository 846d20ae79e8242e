"""Copies across the host/device boundary for the executor: each failure is
an :class:`~nnrt_core.errors.ExecutionError` naming the backend and value."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from nnrt_core.errors import ExecutionError, NnrtError
from nnrt_core.runtime.output_check import describe_value

if TYPE_CHECKING:
    from concurrent.futures import Future

    from nnrt_core.backend.base import Backend

__all__ = ["submitted", "to_host", "to_device"]

# ``st`` is an ExecutionStep and ``observer`` a StepObserver (nnrt_core.runtime.executor, which imports this)


def submitted(st: Any, fut: Any) -> Future:
    """``fut`` when ``run_async`` returned a future, else :class:`ExecutionError`."""
    from concurrent.futures import Future

    if not isinstance(fut, Future):
        raise ExecutionError(f"backend {st.backend.name!r} partition {st.compiled.name!r} run_async returned "
                             f"{describe_value(fut)} instead of a Future")
    return fut


def to_host(name: str, src: Backend, x: Any, on_host: dict[str, Any], observer: Any) -> Any:
    """``src.to_host(x)``, remembered in ``on_host`` and reported to ``observer``
    (:class:`ExecutionError` when the backend fails or returns no host array)."""
    t0 = time.perf_counter() if observer is not None else 0.0
    try:
        y = src.to_host(x)
    except NnrtError:
        raise
    except Exception as e:
        raise ExecutionError(f"backend {src.name!r} failed to copy {name!r} to the host: "
                             f"{type(e).__name__}: {e}") from e
    if not isinstance(y, np.ndarray):
        raise ExecutionError(f"backend {src.name!r} copied {name!r} to the host as {describe_value(y)}; "
                             f"expected a numpy array")
    on_host[name] = y
    if observer is not None:
        observer.transfer(name, "to_host", src, t0, time.perf_counter(), y)
    return y


def to_device(name: str, b: Backend, x: Any) -> Any:
    """``b.to_device(x)``; :class:`ExecutionError` when the backend fails."""
    try:
        y = b.to_device(x)
    except NnrtError:
        raise
    except Exception as e:
        raise ExecutionError(f"backend {b.name!r} failed to copy {name!r} to its device: "
                             f"{type(e).__name__}: {e}") from e
    if y is None:
        raise ExecutionError(f"backend {b.name!r} copied {name!r} to its device as None")
    return y
