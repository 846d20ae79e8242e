"""Random generator handling shared by the random kernels: a generator seeded
from the ``seed`` attribute when present (reproducible sequence across runs of
one compiled model), otherwise from fresh OS entropy."""
from __future__ import annotations

import numpy as np

from nnrt_numpy.kernel import NodeInfo

from ..quant._common import dtype_from_attr


def make_rng(node: NodeInfo) -> np.random.Generator:
    seed = node.attr("seed")
    if seed is None:
        return np.random.default_rng()
    # the attribute is a float; use its bit pattern so 0.5 and 0.7 differ
    return np.random.default_rng(int(np.float32(seed).view(np.uint32)))


def float_dtype(code: int | None, default: np.dtype, fail) -> np.dtype:
    dt = default if code is None else dtype_from_attr(int(code))
    dt = np.dtype(dt)
    if dt.kind != "f" and str(dt) != "bfloat16":
        raise fail(f"dtype must be a floating type, got {dt}")
    return dt
