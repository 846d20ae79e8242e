"""How many threads numpy's BLAS (OpenBLAS) and the NumPy backend's own split
kernels may use while a partition runs.

A compiled partition that calls BLAS runs inside :func:`blas_threads`
(:func:`enter` / :func:`leave`).  For the duration of the run OpenBLAS is set
to one thread, and the run's thread limit for :mod:`nnrt_numpy.parallel`
(which splits large convolutions and GEMMs over its own threads) is:

* ``ScheduleConfig.num_threads`` (``CompileOptions.num_threads``) when given;
* otherwise the process's OpenBLAS setting (normally the number of cores),
  re-capped at every split kernel by the cores idle at that moment (see
  :func:`nnrt_numpy.parallel.threads`), and 1 while the machine is
  oversubscribed on average (1-minute load average above ``cores + 1``,
  read at most every half second).

With ``NNRT_NUMPY_SPLIT=0`` in the environment the previous policy is used
instead: OpenBLAS's own threads, as many as cores were idle at the start of
the run.  Interleaved with ONNX Runtime on 2 cores, OpenBLAS's threads made
ShuffleNet 58 ms instead of 11 ms when they had to share a core with ORT's
spinning pool, and its own spinning workers made every other run
single-threaded.

The previous OpenBLAS setting is restored when the last concurrent run
leaves.  Where the OpenBLAS entry points cannot be found (another BLAS,
another platform), this is a no-op and kernels run single-threaded.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from nnrt_numpy import parallel

__all__ = ["blas_threads", "enter", "leave", "available", "BLAS_OPS"]

#: op types whose kernels call BLAS (a partition without them never touches the setting)
BLAS_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "FusedConv", "FusedGemm", "Attention",
                      "MultiHeadAttention", "LSTM", "GRU", "RNN", "MatMulInteger", "QLinearMatMul",
                      "QLinearConv", "ConvInteger", "DeformConv", "FusedMatMul", "TransposeMatMul",
                      "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLSTM", "QGemm", "GemmFastGelu",
                      "MatMulNBits"})

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


_UNSET: Any = object()
#: (set, get) of the loaded OpenBLAS, found on first use (a MatMul in numpy and /proc/self/maps: ~0.5 ms)
_api: Any = _UNSET
_lock = threading.Lock()
_active = 0
_saved = 0
_cores = os.cpu_count() or 1
_load = {"t": -1.0, "busy": False}
_local = threading.local()
#: split large GEMMs over our own threads (nnrt_numpy.parallel) instead of OpenBLAS's
SPLIT = os.environ.get("NNRT_NUMPY_SPLIT", "1") != "0"


def _resolve() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    global _api
    if _api is _UNSET:
        with _lock:
            if _api is _UNSET:
                _api = _find()
    return _api


def available() -> bool:
    return _resolve() is not None


def _busy() -> bool:
    now = time.monotonic()
    if now - _load["t"] > 0.5:
        try:
            _load["busy"] = os.getloadavg()[0] > _cores + 1
        except OSError:
            _load["busy"] = False
        _load["t"] = now
    return _load["busy"]


def _choose(requested: int) -> int:
    if requested > 0:
        return requested
    return 1 if _busy() else max(1, min(_saved, parallel.idle_cores()))


def enter(requested: int = 0) -> None:
    """Set the thread count for a run (pair every call with :func:`leave`)."""
    global _active, _saved
    if _resolve() is None:
        return
    with _lock:
        if _active == 0:
            _saved = _api[1]()
        _active += 1
        if SPLIT:  # BLAS single-threaded; large GEMMs split by nnrt_numpy.parallel, per GEMM
            _api[0](1)  # as many threads as cores are idle at that moment
            n = requested if requested > 0 else (1 if _busy() else max(1, _saved))
        else:
            n = _choose(requested)
            _api[0](n)
    _local.prev = getattr(_local, "prev", [])
    _local.prev.append(parallel.set_threads(n, adaptive=requested <= 0) if SPLIT else parallel.set_threads(1))


def leave() -> None:
    global _active
    if _api is None or _api is _UNSET:  # no BLAS (or enter() never ran)
        return
    prev = getattr(_local, "prev", None)
    if prev:
        parallel.set_threads(*prev.pop())
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
