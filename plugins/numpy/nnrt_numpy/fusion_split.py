"""Running a fused chain's tails (:mod:`nnrt_numpy.fusion`) in row pieces on the idle cores.

After a chain's head (a MatMul, Gemm, Add...) returned its fresh array, the tails run on it in
place; for a large output with costly tails (MatMul + bias + exact GELU of a transformer's
feed-forward block: ~2.5 ns a value on one thread) they are cut into row pieces of the array seen
as 2-D ``(rows, last axis)`` and run by :func:`nnrt_numpy.parallel.run_chunks` when
:func:`nnrt_numpy.parallel.split_threads` says a second thread pays.  Only tails that give the
same values on any row piece are taken: per-value ones, constants that vary along the last axis
only (a bias), a constant divisor of that kind, and tensor operands of exactly the output's shape
(a residual); the values equal those of one whole-array pass bit for bit (the same float
operations on every value)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from nnrt_numpy import parallel

__all__ = ["split_tails", "TAIL_NS"]

#: ns per value of each tail kind on one thread (bench: a float32 pass over a 200K array ~0.15 ns, GELU's
#: 17 passes and a tanh ~2.4 ns); kinds not listed cannot be split
TAIL_NS = {"relu": 0.15, "clip": 0.15, "leaky": 0.3, "sigmoid": 1.0, "gelu": 2.4, "hsig": 0.5, "hswish": 1.0,
           "hswish3": 1.0, "mul": 0.15, "add": 0.15, "div": 0.2, "add_in": 0.2, "mul_in": 0.2}


def _row_ops(ops: Sequence[tuple], y: np.ndarray, args: Sequence[Any]) -> tuple[list[tuple], float] | None:
    """The ops with constant operands as last-axis vectors, and their ns per value; None when one
    of them needs more than a row piece."""
    n = y.shape[-1]
    out: list[tuple] = []
    ns = 0.0
    for op in ops:
        kind = op[0]
        cost = TAIL_NS.get(kind)
        if cost is None:
            return None
        if kind in ("mul", "add", "div"):
            c = np.asarray(op[1])
            if c.size != 1 and (c.ndim > y.ndim or any(d != 1 for d in c.shape[:-1]) or c.shape[-1] != n):
                return None
            op = (kind, c.reshape(-1) if c.size != 1 else c.reshape(()), *op[2:])
        elif kind in ("add_in", "mul_in") and np.shape(args[op[1]]) != y.shape:
            return None
        out.append(op)
        ns += cost
    return out, ns


def split_tails(ops: Sequence[tuple], y: np.ndarray, args: Sequence[Any],
                apply: Callable[[list, np.ndarray, Sequence[Any]], np.ndarray]) -> bool:
    """Run ``ops`` on ``y`` in place in row pieces on two or more threads (``apply``:
    :func:`nnrt_numpy.fusion.apply_ops`) and return True, or return False (nothing done) when
    ``y`` is small, not C-contiguous, a tail cannot be split or no second core is idle."""
    if y.ndim < 1 or y.size < 65536 or not y.flags.c_contiguous or not ops:
        return False
    plan = _row_ops(ops, y, args)
    if plan is None:
        return False
    row_ops, ns = plan
    rows = y.size // y.shape[-1]
    k = min(parallel.split_threads(parallel.work_us("tail", y.size * ns)), rows)
    if k <= 1:
        return False
    y2 = y.reshape(rows, -1)
    others = {op[1]: np.asarray(args[op[1]]).reshape(rows, -1) for op in row_ops if op[0] in ("add_in", "mul_in")}
    step = -(-rows // (2 * k))

    def piece(i: int) -> None:
        sl = slice(i * step, min(rows, (i + 1) * step))
        pargs = list(args)
        for j, o in others.items():
            pargs[j] = o[sl]
        apply(row_ops, y2[sl], pargs)

    parallel.run_chunks(piece, -(-rows // step), k)
    return True
