"""Splitting one kernel's work (a large convolution or GEMM) over this
process's own threads.

Why not OpenBLAS's threads: OpenBLAS splits a GEMM statically and makes
every thread wait for the slowest one, and its idle workers keep spinning
(``sched_yield``) for a while after each call.  When a core is shared with
another busy thread (ONNX Runtime's pool spins for about 40 ms after each of
its runs) the half that landed there finishes late and the whole GEMM waits;
and the spinning workers make the machine look busy, so a thread count
chosen from the number of running tasks flips between 1 and 2 from one run
to the next.

:func:`run_chunks` instead cuts the work into more pieces than threads and
lets the calling thread and helper threads take pieces from a shared counter
(numpy's matmul and copies release the GIL; BLAS runs single-threaded inside
each piece).  A helper that gets no core only takes fewer pieces; the caller
never waits for a helper that has not started a piece, only for the pieces
already running.  Helpers block on a queue between pieces, so they never
look busy.  :func:`threads` is checked at every split kernel: the run's limit
(:mod:`nnrt_numpy.blas` sets it) capped by the cores idle at that moment (the
runnable-task count of ``/proc/loadavg``), so a run that starts while
another thread spins goes on single-threaded and takes the second core as
soon as that thread stops.

Results do not depend on which thread ran a piece (every piece is the same
single-threaded BLAS call either way), but a split product can differ from
the unsplit one in the last bits: OpenBLAS picks its kernels by size, as it
does when it splits a product over its own threads.
"""
from __future__ import annotations

import itertools
import os
import queue
import threading
import time
from typing import Callable

import numpy as np

from nnrt_core.plugin_api import CORES, thread_budget

__all__ = ["run_chunks", "threads", "set_threads", "matmul", "start_helpers", "work_us", "worth_splitting",
           "split_threads", "SPLIT_US", "COLD_SPLIT_US", "RATES", "HANDOFF_US", "COLD_HANDOFF_US", "WARM_US"]

_local = threading.local()


try:
    _loadavg_fd = os.open("/proc/loadavg", os.O_RDONLY)
except OSError:
    _loadavg_fd = -1


def idle_cores() -> int:
    """Cores not running another task right now, counting the caller's own
    core as idle (the runnable-task count of ``/proc/loadavg``, about 2 µs)."""
    if _loadavg_fd < 0:
        return CORES
    try:
        running = int(os.pread(_loadavg_fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return CORES
    return max(1, CORES - (running - 1))


def threads() -> int:
    """How many threads a split kernel may use now: the run's limit (set by
    :func:`nnrt_numpy.blas.enter`), and when that limit was not given
    explicitly, no more than the run's thread budget
    (:mod:`nnrt_core.runtime.thread_budget`) and the cores idle right now."""
    n, adaptive = getattr(_local, "state", (1, False))
    if n > 1 and adaptive:
        budget = thread_budget()  # a stream's share of the cores for this run
        if budget is not None and budget < n:
            n = budget
        return min(n, idle_cores()) if n > 1 else 1
    return n


def set_threads(n: int, adaptive: bool = False) -> tuple[int, bool]:
    """Set the limit of :func:`threads` for the calling thread; returns the previous state
    (pass it back with ``set_threads(*state)``)."""
    prev = getattr(_local, "state", (1, False))
    _local.state = (max(1, int(n)), bool(adaptive))
    return prev


class _Job:
    __slots__ = ("fn", "n", "claim", "finish", "event", "error")

    def __init__(self, fn: Callable[[int], None], n: int) -> None:
        self.fn = fn
        self.n = n
        self.claim = itertools.count()  # next(): atomic under the GIL
        self.finish = itertools.count(1)
        self.event = threading.Event()
        self.error: BaseException | None = None

    def work(self) -> None:
        n, fn = self.n, self.fn
        while True:
            i = next(self.claim)
            if i >= n:
                return
            try:
                if self.error is None:
                    fn(i)
            except BaseException as e:  # noqa: BLE001  (re-raised in the caller)
                self.error = e
            if next(self.finish) == n:
                self.event.set()


_queues: list[queue.SimpleQueue] = []
_start_lock = threading.Lock()


def _helper(q: queue.SimpleQueue) -> None:
    while True:
        job = q.get()
        if job is None:
            return
        job.work()


def _helpers(k: int) -> list[queue.SimpleQueue]:
    if len(_queues) < k:
        with _start_lock:
            while len(_queues) < k:
                q: queue.SimpleQueue = queue.SimpleQueue()
                threading.Thread(target=_helper, args=(q,), name=f"nnrt-numpy-{len(_queues)}", daemon=True).start()
                _queues.append(q)
    return _queues[:k]


def start_helpers() -> None:
    """Start the helper threads split kernels use (one per core beside the
    caller) now, at build, rather than in the first run."""
    if CORES > 1:
        _helpers(CORES - 1)


def run_chunks(fn: Callable[[int], None], n: int, nthreads: int | None = None) -> None:
    """Call ``fn(i)`` for ``i`` in ``range(n)``, on up to ``nthreads`` threads
    (default :func:`threads`) including the caller; returns when all are done."""
    k = min(n, nthreads if nthreads is not None else threads(), CORES)
    if k <= 1 or getattr(_local, "inside", False):
        for i in range(n):
            fn(i)
        return
    job = _Job(fn, n)
    for q in _helpers(k - 1):
        q.put(job)
    _local.inside = True
    try:
        job.work()
    finally:
        _local.inside = False
    job.event.wait()
    _last_split[0] = time.perf_counter()
    if job.error is not None:
        raise job.error


#: µs the caller loses when it hands a piece to the helper thread and waits for it (waking a blocked
#: thread on the other vCPU, both ways: 60-150 µs on the 2-vCPU VM while the helper ran a piece less than
#: :data:`WARM_US` ago, ``bench_split_thresholds.py --handoff``) ...
HANDOFF_US = 150.0
#: ... and after the helper slept longer (the host lets the idle vCPU go: 130-300 µs after 3-10 ms idle)
COLD_HANDOFF_US = 250.0
#: how long after the end of a split the helper counts as warm
WARM_US = 1000.0
#: one thread's throughput per kind of splittable work, units per µs, measured with
#: ``benchmarks/bench_split_ops.py`` (docs/runtime.md): "gemm" multiply-adds of a BLAS product (1x1 Conv,
#: MatMul), "im2col" multiply-adds of a k x k Conv with its column copies, "depthwise" multiply-adds of a
#: depthwise plan plus "dw_input" values of its padded input planes (the copies cost more than the
#: products there), "softmax" values of a last-axis Softmax, "tail" output values of the fused tail a
#: split Conv runs on its pieces (hard-swish, six ops: ~1.2 ns a value; GELU ~2.2: ``profile_mobile.py``)
RATES = {"gemm": 35_000.0, "im2col": 25_000.0, "depthwise": 30_000.0, "dw_input": 1_000.0, "softmax": 1_000.0,
         "tail": 1_000.0}
#: a kernel splits when its work would take at least this many µs on one thread: the one rule every
#: splitting kernel asks (:func:`split_threads`).  A 2-way split takes t / 2 + hand-off, so it pays from
#: t = 2 x hand-off; measured per kind, two threads beat one from 300-450 µs of work with a warm helper
#: (``bench_split_ops.py``) ...
SPLIT_US = 2 * HANDOFF_US + 50.0
#: ... and from :data:`COLD_SPLIT_US` when no split ended in the last :data:`WARM_US`
COLD_SPLIT_US = 2 * COLD_HANDOFF_US + 50.0
_last_split = [0.0]  # perf_counter() at the end of the last split run on two or more threads


#: GEMM pieces hold at least this many multiply-adds (about 0.1 ms of BLAS): how finely a split cuts
MIN_MACS = 4_000_000


def work_us(kind: str, units: float) -> float:
    """Estimated µs of one thread for ``units`` of work of ``kind`` (a key of :data:`RATES`)."""
    return units / RATES[kind]


def worth_splitting(us: float) -> bool:
    """Whether work estimated at ``us`` µs of one thread (:func:`work_us`) may pay the hand-off of a
    split with a warm helper (:data:`SPLIT_US`): for cutting pieces at build; a kernel decides at run
    time with :func:`split_threads`."""
    return us >= SPLIT_US


def split_threads(us: float) -> int:
    """Threads a kernel with work estimated at ``us`` µs of one thread should use now: 1 below
    :data:`SPLIT_US`, and below :data:`COLD_SPLIT_US` when the helper has slept for :data:`WARM_US`
    (both without reading the load), else :func:`threads`."""
    if us < SPLIT_US or (us < COLD_SPLIT_US and (time.perf_counter() - _last_split[0]) * 1e6 > WARM_US):
        return 1
    return threads()


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, pieces: int = 0) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` for ``a`` of shape (..., M, K) and ``b`` of
    shape (..., K, N), split over :func:`threads` threads along the larger of
    M and N when the product is large enough (equal to one call up to float
    rounding, see the module docstring)."""
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype.kind != "f":
        return np.matmul(a, b, out=out)
    m, kk = a.shape[-2:]
    n = b.shape[-1]
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    batch = int(np.prod(lead)) if lead else 1
    macs = batch * m * kk * n
    k = split_threads(work_us("gemm", macs))
    if k <= 1:
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(lead + (m, n), dtype=np.result_type(a, b))
    if not pieces:
        pieces = min(4 * k, max(k, macs // MIN_MACS))
    # pieces over the batch first, then rows or columns of every batch entry
    per = max(1, -(-pieces // batch))
    a3 = np.broadcast_to(a, lead + (m, kk)).reshape(batch, m, kk) if lead else a.reshape(1, m, kk)
    b3 = np.broadcast_to(b, lead + (kk, n)).reshape(batch, kk, n) if lead else b.reshape(1, kk, n)
    o3 = out.reshape(batch, m, n)
    if not np.shares_memory(o3, out):  # reshape had to copy: cannot write through it
        return np.matmul(a, b, out=out)
    jobs: list[tuple] = []
    if n >= m:  # ranges of columns (each piece packs all of ``a``)
        step = max(-(-n // per), 64 if n >= 128 else n)
        for bi in range(batch):
            for j in range(0, n, step):
                s = slice(j, min(n, j + step))
                jobs.append((a3[bi], b3[bi, :, s], o3[bi, :, s]))
    else:  # ranges of rows, one per thread (each piece packs all of ``b``)
        step = max(-(-m // max(1, -(-k // batch))), 16 if m >= 32 else m)
        for bi in range(batch):
            for j in range(0, m, step):
                s = slice(j, min(m, j + step))
                jobs.append((a3[bi, s], b3[bi], o3[bi, s]))
    if len(jobs) == 1:
        return np.matmul(a, b, out=out)

    def piece(i: int) -> None:
        x, y, z = jobs[i]
        np.matmul(x, y, out=z)

    run_chunks(piece, len(jobs), k)
    return out
