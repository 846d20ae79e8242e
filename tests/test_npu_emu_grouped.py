"""Grouped convolutions with fewer pixels than channels per group run as one
batched product per image with one store: the bits of one GEMM per group
followed by the bias and the fp16 store of each group."""
from __future__ import annotations

import numpy as np
import pytest

from nnrt_npu_emu.binding import Store
from nnrt_npu_emu.hostfuse import RELU_LO, STORE_BOUNDS
from nnrt_npu_emu.numerics import round_fp16
from nnrt_npu_emu.ops.spatial import conv_nd


@pytest.mark.parametrize("n,c,m,hw,g,k", [(1, 544, 544, 7, 4, 1), (2, 272, 544, 7, 4, 1), (1, 64, 96, 5, 2, 3),
                                          (3, 24, 200, 1, 4, 1), (1, 136, 136, 6, 1, 1)])
@pytest.mark.parametrize("relu", [False, True])
def test_batched_groups_match_per_group_products(n, c, m, hw, g, k, relu):
    rng = np.random.default_rng(n * c + m + hw)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float16).astype(np.float32) * 300
    w = rng.standard_normal((m, c // g, k, k)).astype(np.float16).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float16).astype(np.float32)
    p = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))  # (n, c, hw, hw, k, k)
    cols = np.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3)).reshape(n, g, -1, hw * hw)
    wm = np.ascontiguousarray(w.reshape(g, m // g, -1))
    want = np.empty((n, g, m // g, hw * hw), np.float32)
    bounds = (RELU_LO, STORE_BOUNDS[1]) if relu else STORE_BOUNDS
    for i in range(n):
        for j in range(g):
            np.matmul(wm[j], cols[i, j], out=want[i, j])
            want[i, j] += b.reshape(g, m // g, 1)[j]
            round_fp16(want[i, j], None, *bounds)
    out = np.empty((n, m, hw, hw), np.float32)
    conv_nd(x, w, [1, 1], [p] * 4, [1, 1], g, out=out, bias=b,
            post=Store(out, np.empty(out.size, np.uint32), bounds))
    assert np.array_equal(out.reshape(want.shape).view(np.uint32), want.view(np.uint32))
