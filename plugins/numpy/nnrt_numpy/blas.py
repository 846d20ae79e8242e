"""How many threads numpy's BLAS (OpenBLAS) may use while a partition runs.

OpenBLAS splits every large enough GEMM over all cores and makes the caller
wait for its worker threads.  On an idle machine that is what we want; on an
oversubscribed one (more runnable tasks than cores) each of those waits can
last a scheduler time slice, and a convolution of a few microseconds takes
milliseconds.  A compiled partition that calls BLAS therefore runs inside
:func:`blas_threads`, which sets the thread count for the duration of the run:

* ``ScheduleConfig.num_threads`` (``CompileOptions.num_threads``) when given;
* otherwise the process's current setting, capped by the cores that are
  idle right now: the runnable-task count of ``/proc/loadavg`` (read at the
  start of every run, about 3 µs) minus this thread.  When another process's
  threads are running or spinning (ONNX Runtime's thread pool spins for a
  while after each of its runs), OpenBLAS's extra workers would only queue
  behind them: interleaved with ORT on 2 cores, two BLAS threads made
  ShuffleNet 58 ms instead of 11 ms.  Also 1 while the machine is
  oversubscribed on average (1-minute load average above ``cores + 1``,
  read at most every half second).

The previous setting is restored when the last concurrent run leaves.  The
thread count changes nothing in the results of OpenBLAS's GEMM.  Where the
OpenBLAS entry points cannot be found (another BLAS, another platform), this
is a no-op.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["blas_threads", "enter", "leave", "available", "BLAS_OPS"]

#: op types whose kernels call BLAS (a partition without them never touches the setting)
BLAS_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "FusedConv", "FusedGemm", "Attention",
                      "MultiHeadAttention", "LSTM", "GRU", "RNN", "MatMulInteger", "QLinearMatMul",
                      "QLinearConv", "ConvInteger", "DeformConv"})

_SYMBOLS = [  # (set, get) in the naming schemes of the wheels' OpenBLAS builds
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
]


def _find() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    try:
        import numpy as np

        np.ones((2, 2), np.float32) @ np.ones((2, 2), np.float32)  # make sure BLAS is loaded
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "openblas" in line.lower()}
    except (OSError, ImportError):
        return None
    np_dir = os.path.dirname(os.path.dirname(np.__file__))
    # numpy's own copy first (scipy may bundle another one)
    for path in sorted(paths, key=lambda p: (not p.startswith(os.path.join(np_dir, "numpy")), p)):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _SYMBOLS:
            s, g = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if s is not None and g is not None:
                s.argtypes, s.restype = [ctypes.c_int], None
                g.argtypes, g.restype = [], ctypes.c_int
                return s, g
    return None


_api = _find()
_lock = threading.Lock()
_active = 0
_saved = 0
_cores = os.cpu_count() or 1
_load = {"t": -1.0, "busy": False}


def available() -> bool:
    return _api is not None


try:
    _loadavg_fd = os.open("/proc/loadavg", os.O_RDONLY)
except OSError:
    _loadavg_fd = -1


def _idle_cores() -> int:
    """Cores not running another task right now (the caller's thread excluded)."""
    if _loadavg_fd < 0:
        return _cores
    try:
        running = int(os.pread(_loadavg_fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return _cores
    return max(1, _cores - (running - 1))


def _busy() -> bool:
    now = time.monotonic()
    if now - _load["t"] > 0.5:
        try:
            _load["busy"] = os.getloadavg()[0] > _cores + 1
        except OSError:
            _load["busy"] = False
        _load["t"] = now
    return _load["busy"]


def enter(requested: int = 0) -> None:
    """Set the thread count for a run (pair every call with :func:`leave`)."""
    global _active, _saved
    if _api is None:
        return
    with _lock:
        if _active == 0:
            _saved = _api[1]()
        _active += 1
        _api[0](requested if requested > 0 else (1 if _busy() else max(1, min(_saved, _idle_cores()))))


def leave() -> None:
    global _active
    if _api is None:
        return
    with _lock:
        _active -= 1
        if _active == 0:
            _api[0](_saved)


@contextmanager
def blas_threads(requested: int = 0) -> Iterator[None]:
    """Run the body with the BLAS thread count chosen as described above."""
    enter(requested)
    try:
        yield
    finally:
        leave()
