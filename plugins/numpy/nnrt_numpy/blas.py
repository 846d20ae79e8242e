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
leaves.  The setting is read and changed through ``threadpoolctl``'s public
controllers.  Where no OpenBLAS is found (another BLAS, another platform,
no ``threadpoolctl``), this is a no-op and kernels run single-threaded.
"""
from __future__ import annotations

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

def _find() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """(set, get) of the loaded OpenBLAS's thread count, through threadpoolctl's
    public controllers (numpy's own copy first: scipy may bundle another one)."""
    try:
        import numpy as np
        from threadpoolctl import ThreadpoolController

        np.ones((2, 2), np.float32) @ np.ones((2, 2), np.float32)  # make sure BLAS is loaded
        libs = ThreadpoolController().select(internal_api="openblas").lib_controllers
    except (ImportError, OSError):
        return None
    np_dir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy")
    for lib in sorted(libs, key=lambda c: (not str(c.filepath).startswith(np_dir), str(c.filepath))):
        return lib.set_num_threads, lib.get_num_threads
    return None


_UNSET: Any = object()
#: (set, get) of the loaded OpenBLAS, found on first use (a MatMul in numpy and threadpoolctl's scan of the loaded libraries)
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
