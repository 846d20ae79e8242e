"""2-D depthwise convolution (one fp32 filter per channel, channel
multiplier 1) on the NumPy backend's host kernel,
:class:`nnrt_numpy.host_kernels.DepthwisePlan`: per-shape choice of
im2col + one batched BLAS product (``cols``; whole padded rows per tap at
stride 1) or a channels-last einsum (``cl``), pooled scratch, pieces of
channels on the idle host threads (cut by shape only, not by the machine's
load).

The chip accumulates each output's taps in fp32 in an order of its own;
the emulator's definition is the order of its earlier kernels: a BLAS
product per channel (``spatial._depthwise_matmul``) from
:data:`~nnrt_npu_emu.ops.spatial.DEPTHWISE_MATMUL_PIXELS` output pixels, an
einsum over a channels-last window (``spatial._depthwise_channels_last``)
below.  The plan is made in the same family (``cols`` / ``cl``, not the
NumPy backend's own per-shape choice: a BLAS product and an einsum sum
long filters in different orders), and ``tests/test_npu_emu_hostdw.py``
checks bit equality with those kernels on random shapes, strides,
dilations and pads; the bias is added after the sum, as before."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np

from nnrt_numpy.host_kernels import parallel  # the process's one pool of helper threads (public API)
from nnrt_numpy.host_kernels import DepthwisePlan  # the NumPy backend's depthwise kernel (public API)

__all__ = ["depthwise_2d", "MAX_PLANS", "ENABLED"]

#: plans kept, least recently used dropped first (each pools up to one scratch set of about
#: ``DepthwisePlan``'s BLOCK_BYTES, 2 MiB, per piece running at once)
MAX_PLANS = 32
#: False: conv_nd keeps the emulator's own depthwise kernels (tests compare the two)
ENABLED = True
_F32 = np.dtype(np.float32)
_plans: OrderedDict[tuple, DepthwisePlan] = OrderedDict()
_lock = threading.Lock()


def _plan(key: tuple) -> DepthwisePlan:
    with _lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    n, c, hw, k, strides, dil, begin, end, osz, mode = key
    plan = DepthwisePlan(n, c, 1, hw, k, strides, dil, begin, end, osz, _F32, mode)
    with _lock:
        _plans[key] = plan
        while len(_plans) > MAX_PLANS:
            _plans.popitem(last=False)
    return plan


def depthwise_2d(x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[int],
                 dil: Sequence[int], osz: Sequence[int], y: np.ndarray, mode: str) -> bool:
    """Write the depthwise convolution of ``x`` (N, C, H, W) with ``w``
    (C, 1, kh, kw), both float32, into ``y`` (N, C, *osz), C-contiguous
    float32, without bias, by ``mode`` (``cols`` or ``cl``); False (nothing written) when this kernel does not
    take the case (other ranks or types, a channel multiplier)."""
    if not ENABLED or x.ndim != 4 or x.dtype != _F32 or w.dtype != _F32 or w.shape[0] != x.shape[1] \
            or w.shape[1] != 1 or y.dtype != _F32 or not y.flags.c_contiguous or 0 in y.shape:
        return False
    key = (x.shape[0], x.shape[1], tuple(x.shape[2:]), tuple(int(v) for v in w.shape[2:]),
           tuple(int(v) for v in strides), tuple(int(v) for v in dil), (int(pads[0]), int(pads[1])),
           (int(pads[2]), int(pads[3])), tuple(int(v) for v in osz), mode)
    plan = _plan(key)
    plan.run(x, w, None, y, parallel.split_threads(plan.est_us))  # the NumPy backend's one split rule
    return True
