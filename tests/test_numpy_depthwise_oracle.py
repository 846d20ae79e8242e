"""Depthwise convolutions of the NumPy backend against the conv-by-definition oracle
(``tests/conv_reference.py``, float64) on the shapes each way of ``_depthwise.py`` is
chosen for (3 x 3 over any plane, 5 x 5 over short or wide rows, many or few channels),
with the shape-based choice and with each way forced: strides, dilations, explicit
(also asymmetric) pads and SAME / VALID auto_pad, channel multipliers, batch 1 and 3."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.kernel import NodeInfo
from nnrt_numpy.ops.nn import _depthwise
from nnrt_numpy.ops.nn.conv import Conv

sys.path.insert(0, str(Path(__file__).parent))
from conv_reference import conv_direct  # noqa: E402

RNG = np.random.default_rng(19)

#: (channels, height, width, kernel): the way the shape takes by itself is in the id
SHAPES = [(12, 9, 14, 3), (70, 5, 30, 3), (20, 4, 17, 5), (200, 2, 26, 5), (40, 6, 9, 5)]
PADS = [{"pads": [1, 1, 1, 1]}, {"pads": [2, 0, 1, 3]}, {"pads": [0, 0, 0, 0]}, {"auto_pad": "SAME_UPPER"},
        {"auto_pad": "SAME_LOWER"}, {"auto_pad": "VALID"}]


def explicit_pads(pad: dict, hw: tuple, k: int, strides: list, dil: list) -> list:
    """[top, left, bottom, right] of ``pad`` (SAME: the total split, the odd one at the end for UPPER)."""
    if "pads" in pad:
        return pad["pads"]
    if pad["auto_pad"] == "VALID":
        return [0, 0, 0, 0]
    begin, end = [], []
    for size, s, d in zip(hw, strides, dil):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small = total // 2
        begin.append(small if pad["auto_pad"] == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return begin + end


STRIDES_DILATIONS = [((1, 1), (1, 1)), ((2, 2), (1, 1)), ((2, 1), (1, 2)), ((1, 1), (2, 2))]


def _fits(shape: tuple, pad: dict, stride: tuple, dil: tuple) -> bool:
    """Whether the dilated kernel fits into the padded input (else there is no output)."""
    _, h, w_, k = shape
    pads = explicit_pads(pad, (h, w_), k, list(stride), list(dil))
    return all(size + pads[i] + pads[i + 2] - (k - 1) * dil[i] >= 1 for i, size in enumerate((h, w_)))


CASES = [pytest.param(shape, pad, sd[0], sd[1], id="c{}x{}x{}k{}-{}-s{}d{}".format(
             *shape, next(iter(pad.values())), "".join(map(str, sd[0])), "".join(map(str, sd[1]))))
         for shape in SHAPES for pad in PADS for sd in STRIDES_DILATIONS if _fits(shape, pad, *sd)]


@pytest.mark.parametrize("forced", [None, "cols", "cl", "rows"])
@pytest.mark.parametrize("shape,pad,stride,dil", CASES)
def test_depthwise_matches_the_definition(monkeypatch, forced, shape, pad, stride, dil):
    monkeypatch.setattr(_depthwise, "MODE", forced)
    c, h, w_, k = shape
    pads = explicit_pads(pad, (h, w_), k, list(stride), list(dil))
    for n, mult in [(1, 1), (3, 2)]:
        x = RNG.standard_normal((n, c, h, w_)).astype(np.float32)
        w = RNG.standard_normal((c * mult, 1, k, k)).astype(np.float32)
        b = RNG.standard_normal(c * mult).astype(np.float32)
        attrs = {"group": c, "kernel_shape": [k, k], "strides": list(stride), "dilations": list(dil), **pad}
        info = NodeInfo(name="dw", op_type="Conv", opset=11, attrs=attrs, num_inputs=3,
                        input_present=(True,) * 3, input_dtypes=(np.dtype(np.float32),) * 3,
                        input_shapes=(x.shape, w.shape, b.shape), const_inputs=(None, w, b))
        kern = Conv(info)
        got = kern(x, w, b)[0]
        want = conv_direct(x, w, stride, pads, dil, c) + b.astype(np.float64)[:, None, None]
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max(initial=0))))
        plan = kern._dw_plan(x.shape, w.shape, np.dtype(np.float32))
        if forced is not None:
            assert plan.mode == forced


def test_the_way_each_shape_takes():
    def mode(n, c, h, w, k, s=1):
        out = [(h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1]
        return _depthwise.DepthwisePlan(n, c, 1, (h, w), [k, k], [s, s], [1, 1], [k // 2] * 2, [k // 2] * 2, out,
                                        np.float32).mode
    assert mode(1, 16, 3, 96, 3) == "rows"  # few input rows (<= 4 x kernel rows), outputs 12+ wide: banded GEMMs
    assert mode(1, 384, 10, 15, 5) == "rows"
    assert mode(8, 480, 12, 80, 5, 2) == "rows"
    assert mode(1, 240, 12, 80, 5) == "rows"
    assert mode(1, 128, 12, 160, 3) == "rows"
    assert mode(1, 64, 24, 160, 3) == "cols"  # 24 rows > 4 x 3: im2col
    assert mode(1, 16, 160, 240, 3) == "cols"
    assert mode(8, 64, 56, 56, 3) == "cols"
    assert mode(1, 544, 7, 7, 3) == "cl"  # short rows, many channels (ShuffleNet)
    assert mode(1, 136, 28, 28, 3, 2) == "cl"
    assert mode(1, 64, 14, 14, 3) == "cols"  # short rows, few channels
    assert mode(8, 256, 28, 28, 5, 2) == "cl"
    assert mode(8, 480, 24, 80, 5) == "cols"  # stride 1: im2col copies whole rows

@pytest.mark.parametrize("kernel,pads", [((3, 1), [1, 0, 1, 0]), ((1, 5), [0, 2, 0, 2]), ((3, 3), [0, 1, 2, 1])])
def test_stride_1_im2col_runs_over_whole_padded_rows(kernel, pads):
    """Stride 1 copies each tap's columns as one run (``plan.flat``), with or without
    wrapped-around outputs to drop (a kernel one column wide has none)."""
    c = 9
    x = RNG.standard_normal((2, c, 7, 11)).astype(np.float32)
    w = RNG.standard_normal((c, 1) + kernel).astype(np.float32)
    attrs = {"group": c, "kernel_shape": list(kernel), "pads": pads}
    info = NodeInfo(name="dw", op_type="Conv", opset=11, attrs=attrs, num_inputs=2, input_present=(True,) * 2,
                    input_dtypes=(np.dtype(np.float32),) * 2, input_shapes=(x.shape, w.shape),
                    const_inputs=(None, w))
    kern = Conv(info)
    plan = kern._dw_plan(x.shape, w.shape, np.dtype(np.float32))
    assert plan.mode == "cols" and plan.flat
    assert (plan.padded[1] == plan.out[1]) == (kernel[1] == 1)
    want = conv_direct(x, w, (1, 1), pads, (1, 1), c)
    for _ in range(2):  # the second run reuses the pooled scratch (its spare row must still be zero)
        np.testing.assert_allclose(kern(x, w)[0], want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    strided = _depthwise.DepthwisePlan(2, c, 1, (7, 11), [3, 3], [2, 1], [1, 1], [1, 1], [1, 1], [4, 11], np.float32)
    assert not strided.flat


def test_rows_way_bounds_its_banded_weights():
    """A large kernel over many rows would make big banded weights: im2col instead."""
    def plan(h, k):
        return _depthwise.DepthwisePlan(1, 8, 1, (h, 64), [k, k], [1, 1], [1, 1], [k // 2] * 2, [k // 2] * 2,
                                        [h, 64], np.float32)
    assert plan(12, 5).mode == "rows"  # 12 x (12 * 5 + 1) = 732 values per channel
    big = plan(40, 11)  # 40 rows <= 4 x 11, but 40 x (40 * 11 + 1) = 17,640 values per channel
    assert big.mode != "rows"
    x = RNG.standard_normal((1, 8, 12, 64)).astype(np.float32)
    w = RNG.standard_normal((8, 1, 5, 5)).astype(np.float32)
    y = np.empty((1, 8, 12, 64), np.float32)
    plan(12, 5).run(x, w, None, y)
    want = conv_direct(x, w, (1, 1), [2, 2, 2, 2], (1, 1), 8)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
