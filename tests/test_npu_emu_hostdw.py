"""The emulator's depthwise convolution on the NumPy backend's host kernel
(nnrt_npu_emu.ops.hostdw) gives the bits of the emulator's own kernels."""
from __future__ import annotations

import numpy as np
import pytest

from nnrt_npu_emu.ops import hostdw
from nnrt_npu_emu.ops.spatial import conv_nd

CASES = [  # (N, C, H, W, kh, kw, strides, pads, dilations)
    (1, 136, 28, 28, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
    (1, 272, 14, 14, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
    (1, 112, 56, 56, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),
    (1, 544, 7, 7, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
    (2, 96, 17, 23, 5, 5, (2, 1), (2, 1, 0, 2), (1, 1)),
    (1, 40, 30, 12, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)),
    (3, 8, 9, 9, 3, 1, (1, 2), (0, 0, 0, 0), (1, 1)),
    (1, 64, 20, 20, 3, 3, (1, 1), (-1, 1, 1, -1), (1, 1)),
    (1, 128, 33, 31, 7, 7, (2, 2), (3, 3, 3, 3), (1, 1)),
    (1, 32, 64, 64, 7, 7, (1, 1), (3, 3, 3, 3), (1, 1)),
    (2, 200, 12, 12, 5, 5, (1, 1), (2, 2, 2, 2), (1, 1)),
    (1, 24, 112, 112, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),
]


def _conv(x, w, b, strides, pads, dil, enabled: bool) -> np.ndarray:
    old = hostdw.ENABLED
    hostdw.ENABLED = enabled
    try:
        return conv_nd(x, w, list(strides), list(pads), list(dil), x.shape[1], bias=b)
    finally:
        hostdw.ENABLED = old


@pytest.mark.parametrize("case", CASES)
def test_host_depthwise_matches_emulator_kernels(case):
    n, c, h, wd, kh, kw, strides, pads, dil = case
    rng = np.random.default_rng(sum(case[:6]))
    x = rng.standard_normal((n, c, h, wd)).astype(np.float16).astype(np.float32)
    w = rng.standard_normal((c, 1, kh, kw)).astype(np.float16).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float16).astype(np.float32)
    ref = _conv(x, w, b, strides, pads, dil, False)
    for _ in range(2):  # the second run reuses the pooled plan and its scratch
        got = _conv(x, w, b, strides, pads, dil, True)
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


def test_host_depthwise_declines_other_cases():
    y = np.empty((1, 8, 6, 6), np.float32)
    x = np.ones((1, 8, 6, 6), np.float16)
    w = np.ones((8, 1, 3, 3), np.float32)
    assert not hostdw.depthwise_2d(x, w, (1, 1), (1, 1, 1, 1), (1, 1), (6, 6), y, "cl")  # fp16 input
    assert not hostdw.depthwise_2d(np.ones((1, 8, 6), np.float32), w[..., 0], (1,), (1, 1), (1,), (6,),
                                   y[..., 0], "cl")  # 1-D
    assert not hostdw.depthwise_2d(x.astype(np.float32), w, (1, 1), (1, 1, 1, 1), (1, 1), (6, 6),
                                   np.empty((1, 8, 6, 6), np.float32).transpose(0, 1, 3, 2), "cols")


def test_plan_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(hostdw, "MAX_PLANS", 2)
    for hw in (5, 6, 7, 8):
        x = np.ones((1, 4, hw, hw), np.float32)
        y = np.empty((1, 4, hw, hw), np.float32)
        assert hostdw.depthwise_2d(x, np.ones((4, 1, 3, 3), np.float32), (1, 1), (1, 1, 1, 1), (1, 1), (hw, hw), y,
                                   "cl")
        assert y[0, 0, 2, 2] == 9.0 and y[0, 0, 0, 0] == 4.0
    assert len(hostdw._plans) <= 2


def test_host_depthwise_matches_on_random_shapes():
    rng = np.random.default_rng(14)
    for _ in range(40):
        k = [int(v) for v in rng.integers(1, 6, 2)]
        s = [int(v) for v in rng.integers(1, 3, 2)]
        d = [int(v) for v in rng.integers(1, 3, 2)]
        pads = [int(v) for v in rng.integers(-1, 3, 4)]
        hw = [int(rng.integers(k[i] * d[i] + 2, 40)) for i in range(2)]
        case = (int(rng.integers(1, 3)), int(rng.integers(1, 160)), hw[0], hw[1], k[0], k[1], s, pads, d)
        test_host_depthwise_matches_emulator_kernels(case)
