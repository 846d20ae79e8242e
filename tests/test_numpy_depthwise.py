"""Depthwise and grouped convolutions of the NumPy backend against ONNX Runtime
(the ONNX reference implementation where ORT refuses: SAME auto_pad with dilations):
strides 1-3, dilations 1-2, explicit (also asymmetric) pads and every
auto_pad, channel multipliers 1-2, groups from 1 to C, batch 1 and 3, odd
sizes, 1-D and 2-D; the blocked / threaded paths of
``nnrt_numpy.ops.nn._depthwise``; scratch made at compile time."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_core.errors import OpError
from nnrt_numpy import parallel
from nnrt_numpy.kernel import NodeInfo
from nnrt_numpy.ops.nn import _depthwise
from nnrt_numpy.ops.nn import conv as conv_module
from nnrt_numpy.ops.nn.conv import Conv

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(7)


def conv_node(attrs: dict, xs: tuple, w: np.ndarray, b: np.ndarray | None, dtype=np.float32,
              static: bool = True) -> NodeInfo:
    shapes = (xs if static else (None,) * len(xs), w.shape) + ((b.shape,) if b is not None else ())
    consts = (None, w) + ((b,) if b is not None else ())
    return NodeInfo(name="conv", op_type="Conv", opset=11, attrs=attrs, num_inputs=len(shapes),
                    input_present=(True,) * len(shapes), input_dtypes=(np.dtype(dtype),) * len(shapes),
                    input_shapes=shapes, const_inputs=consts)


def ort_conv(attrs: dict, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    names = ["x", "w"] + (["b"] if b is not None else [])
    inits = [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())]
    if b is not None:
        inits.append(helper.make_tensor("b", TensorProto.FLOAT, b.shape, b))
    node = helper.make_node("Conv", names, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)
    if attrs.get("auto_pad", "NOTSET").startswith("SAME") and max(attrs.get("dilations", [1])) > 1:
        # ONNX Runtime refuses SAME auto_pad with dilations: the ONNX reference implementation instead
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(m).run(None, {"x": x})[0]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


def check(attrs: dict, n: int, c: int, spatial: tuple, m: int, kernel: tuple, bias: bool = True,
          static: bool = True) -> np.ndarray:
    g = attrs.get("group", 1)
    x = RNG.standard_normal((n, c) + spatial).astype(np.float32)
    w = RNG.standard_normal((m, c // g) + kernel).astype(np.float32)
    b = RNG.standard_normal(m).astype(np.float32) if bias else None
    k = Conv(conv_node(attrs, x.shape, w, b, static=static))
    got = k(x, w, b)[0] if b is not None else k(x, w)[0]
    want = ort_conv(attrs, x, w, b)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    return got


@pytest.fixture(autouse=True)
def no_tap_loop(monkeypatch):
    """The small test shapes take ``_depthwise.py`` (not the per-tap loop for few channels) unless a test says so."""
    monkeypatch.setattr(conv_module, "TAP_LOOP_MAX", -1)


@pytest.fixture(params=["cols", "cl", "rows", "taps"])
def mode(request, monkeypatch):
    """Run the test with every plane taking the im2col way, the channels-last way, the banded
    row-GEMM way, then the tap loop."""
    monkeypatch.setattr(_depthwise, "MODE", "cl" if request.param == "taps" else request.param)
    if request.param == "taps":
        monkeypatch.setattr(conv_module, "TAP_LOOP_MAX", 1 << 62)
    return request.param


PADS = [("pads", [0, 0, 0, 0]), ("pads", [1, 1, 1, 1]), ("pads", [2, 0, 1, 3]), ("auto_pad", "SAME_UPPER"),
        ("auto_pad", "SAME_LOWER"), ("auto_pad", "VALID")]


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("dil", [1, 2])
@pytest.mark.parametrize("pad", PADS, ids=lambda p: str(p[1]))
@pytest.mark.parametrize("mult", [1, 2])
def test_depthwise_2d_grid_matches_onnxruntime(stride, dil, pad, mult, mode):
    c = 5
    for n, spatial, kernel in [(1, (11, 9), (3, 3)), (3, (10, 13), (5, 3))]:
        attrs = {"group": c, "kernel_shape": list(kernel), "strides": [stride, stride + (stride == 3) * -1],
                 "dilations": [dil, dil], pad[0]: pad[1]}
        check(attrs, n, c, spatial, c * mult, kernel, bias=n == 1)


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
@pytest.mark.parametrize("stride", [1, 2])
def test_grouped_conv_between_1_and_c_matches_onnxruntime(groups, stride):
    c = 6
    for n, pad in [(1, [1, 1, 1, 1]), (3, [0, 2, 1, 0])]:
        attrs = {"group": groups, "kernel_shape": [3, 3], "strides": [stride, stride], "pads": pad}
        check(attrs, n, c, (9, 7), 12, (3, 3))


@pytest.mark.parametrize("stride,dil,pad", [(1, 1, [2, 2]), (2, 1, [1, 3]), (3, 2, [0, 0]), (1, 2, [3, 1])])
def test_depthwise_1d_matches_onnxruntime(stride, dil, pad, mode):
    for n, mult in [(1, 1), (3, 2)]:
        attrs = {"group": 4, "kernel_shape": [5], "strides": [stride], "dilations": [dil], "pads": pad}
        check(attrs, n, 4, (23,), 4 * mult, (5,))


def test_kernel_rows_that_only_read_padding_are_dropped(mode):
    attrs = {"group": 8, "kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}
    x = RNG.standard_normal((2, 8, 2, 11)).astype(np.float32)
    w = RNG.standard_normal((8, 1, 5, 5)).astype(np.float32)
    k = Conv(conv_node(attrs, x.shape, w, None))
    plan = k._dw_plan(x.shape, w.shape, np.dtype(np.float32))
    assert plan.kernel == [3, 5] and plan.taps == 15  # rows 0 and 4 never reach the 2-row map
    np.testing.assert_allclose(k(x, w)[0], ort_conv(attrs, x, w, None), rtol=1e-4, atol=1e-4)
    # strided and dilated: rows 0 and 2 of a 3-row dilated kernel over one input row
    check({"group": 4, "kernel_shape": [3, 3], "pads": [2, 1, 2, 1], "dilations": [2, 1], "strides": [2, 1]},
          1, 4, (1, 9), 4, (3, 3))


def test_thin_planes_and_kernels_larger_than_the_input(mode):
    # PP-OCR style: 2-row maps under a 5x5 kernel, and a kernel wider than the padded map
    check({"group": 6, "kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}, 2, 6, (2, 17), 6, (5, 5))
    check({"group": 3, "kernel_shape": [3, 7], "pads": [1, 3, 1, 3], "strides": [2, 1]}, 1, 3, (1, 2), 3, (3, 7))


@pytest.mark.parametrize("mode", ["cols", "cl", "rows"])
def test_many_pieces_on_two_threads_equal_onnxruntime(monkeypatch, mode):
    """One channel per piece (several pieces per image) on two threads, in either mode."""
    monkeypatch.setattr(_depthwise, "BLOCK_BYTES", 1)
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)  # pieces for the threads whatever the size
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(_depthwise, "MODE", mode)
    prev = parallel.set_threads(2)
    try:
        for pads, strides in [([0, 0, 0, 0], [1, 1]), ([1, 2, 0, 1], [2, 1])]:  # one channel per piece
            attrs = {"group": 7, "kernel_shape": [3, 3], "pads": pads, "strides": strides}
            x = RNG.standard_normal((3, 7, 10, 12)).astype(np.float32)
            w = RNG.standard_normal((14, 1, 3, 3)).astype(np.float32)
            b = RNG.standard_normal(14).astype(np.float32)
            k = Conv(conv_node(attrs, x.shape, w, b))
            plan = k._dw_plan(x.shape, w.shape, np.dtype(np.float32))
            assert plan.cb == 1 and plan.nblocks == 21 and plan.mode == mode
            np.testing.assert_allclose(k(x, w, b)[0], ort_conv(attrs, x, w, b), rtol=1e-4, atol=1e-4)
            assert plan.ready() >= 1
    finally:
        parallel.set_threads(*prev)


def test_channels_last_pieces_hold_several_images_when_channels_are_few(monkeypatch):
    monkeypatch.setattr(_depthwise, "MODE", "cl")
    monkeypatch.setattr(_depthwise, "CL_LANES", 8)
    for n, mult in [(5, 1), (7, 2)]:  # 3 channels: 3 images a piece, the last piece short
        attrs = {"group": 3, "kernel_shape": [3, 3], "pads": [1, 0, 1, 2], "strides": [1, 2]}
        x = RNG.standard_normal((n, 3, 9, 8)).astype(np.float32)
        w = RNG.standard_normal((3 * mult, 1, 3, 3)).astype(np.float32)
        b = RNG.standard_normal(3 * mult).astype(np.float32)
        k = Conv(conv_node(attrs, x.shape, w, b))
        plan = k._dw_plan(x.shape, w.shape, np.dtype(np.float32))
        assert plan.mode == "cl" and plan.ipp == 3 and plan.nblocks == -(-n // 3)
        np.testing.assert_allclose(k(x, w, b)[0], ort_conv(attrs, x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,n", [(6, 1), (5, 1), (130, 1), (3, 2)])
def test_large_convolutions_get_enough_pieces_and_every_channel(monkeypatch, c, n):
    monkeypatch.setattr(parallel, "SPLIT_US", 0.0)  # pieces for the threads whatever the size
    monkeypatch.setattr(parallel, "COLD_SPLIT_US", 0.0)
    monkeypatch.setattr(_depthwise, "CL_LANES", 2)
    prev = parallel.set_threads(2)
    try:
        for mode in ("cols", "cl"):
            monkeypatch.setattr(_depthwise, "MODE", mode)
            attrs = {"group": c, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
            x = RNG.standard_normal((n, c, 7, 6)).astype(np.float32)
            w = RNG.standard_normal((c, 1, 3, 3)).astype(np.float32)
            k = Conv(conv_node(attrs, x.shape, w, None))
            plan = k._dw_plan(x.shape, w.shape, np.dtype(np.float32))
            assert plan.nblocks >= min(_depthwise.PIECES, n * c // (2 if mode == "cl" else 1))
            assert (plan.cblocks - 1) * plan.cb < c <= plan.cblocks * plan.cb
            np.testing.assert_allclose(k(x, w)[0], ort_conv(attrs, x, w, None), rtol=1e-4, atol=1e-4)
    finally:
        parallel.set_threads(*prev)


def test_float64_float16_and_writing_into_out():
    c = 4
    x = RNG.standard_normal((2, c, 9, 9))
    w = RNG.standard_normal((c, 1, 3, 3))
    attrs = {"group": c, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}
    want = ort_conv(attrs, x.astype(np.float32), w.astype(np.float32), None)
    got64 = Conv(conv_node(attrs, x.shape, w, None, np.float64))(x, w)[0]
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, want, rtol=1e-4, atol=1e-4)
    x16, w16 = x.astype(np.float16), w.astype(np.float16)
    got16 = Conv(conv_node(attrs, x.shape, w16, None, np.float16))(x16, w16)[0]
    assert got16.dtype == np.float16
    np.testing.assert_allclose(got16.astype(np.float32), want, rtol=2e-2, atol=2e-2)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    out = np.full(want.shape, np.nan, np.float32)
    assert Conv(conv_node(attrs, x.shape, w32, None))(x32, w32, out=out)[0] is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_static_shapes_make_the_plan_and_scratch_at_compile_time():
    c = 8
    w = RNG.standard_normal((c, 1, 3, 3)).astype(np.float32)
    k = Conv(conv_node({"group": c, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (2, c, 12, 12), w, None))
    plan = k._dw_plan((2, c, 12, 12), w.shape, np.dtype(np.float32))
    assert plan.ready() >= 1  # scratch made by the constructor
    dyn = Conv(conv_node({"group": c, "kernel_shape": [3, 3]}, (2, c, 12, 12), w, None, static=False))
    assert not [p for p in dyn._plans.values() if isinstance(p, _depthwise.DepthwisePlan)]


def test_bad_depthwise_inputs_are_named_errors():
    c = 4
    w = RNG.standard_normal((c, 1, 3, 3)).astype(np.float32)
    k = Conv(conv_node({"group": c, "kernel_shape": [3, 3]}, (1, c, 6, 6), w, None))
    with pytest.raises(OpError, match="input channels 5"):
        k(np.zeros((1, 5, 6, 6), np.float32), w)
    with pytest.raises(OpError, match="bias B"):
        k(np.zeros((1, c, 6, 6), np.float32), w, np.zeros(3, np.float32))


@pytest.mark.parametrize("shape", list(itertools.product([1, 2], [1, 3], [1, 4])))
def test_tiny_maps(shape, mode):
    n, h, w_ = shape
    check({"group": 2, "kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}, n, 2, (h, w_), 2, (3, 3))


@pytest.mark.parametrize("hw,kernel,strides,dil,pads", [
    ((6, 9), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((5, 12), (5, 5), (2, 2), (1, 1), (2, 2, 2, 2)),
    ((4, 10), (3, 5), (1, 1), (2, 1), (2, 2, 0, 2)),
    ((7, 8), (3, 3), (3, 1), (1, 1), (0, 1, 2, 1)),
    ((2, 11), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),  # kernel rows that only read padding are trimmed
    ((9, 9), (3, 3), (2, 2), (2, 2), (3, 1, 0, 1)),
    ((16, 14), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
])
def test_banded_weights_match_the_row_by_row_layout(hw, kernel, strides, dil, pads):
    """``rows`` weights (made with one fancy-indexed copy) equal the band written output row by
    kernel row, with the bias column, bit for bit."""
    c, mult = 3, 2
    ho = [(s + p0 + p1 - d * (k - 1) - 1) // st + 1
          for s, k, st, d, p0, p1 in zip(hw, kernel, strides, dil, pads[:2], pads[2:])]
    plan = _depthwise.DepthwisePlan(1, c, mult, hw, kernel, strides, dil, pads[:2], pads[2:], ho,
                                    np.float32, mode="rows")
    w = RNG.standard_normal((c * mult, 1) + kernel).astype(np.float32)
    bias = RNG.standard_normal(c * mult).astype(np.float32)
    wt = w.reshape((c, mult) + kernel)[(Ellipsis,) + plan.live]
    (kh, kw), rows_out = plan.kernel, plan.out[0]
    want = np.zeros((c, mult, rows_out, plan.hin, kw), np.float32)
    for r in range(rows_out):
        for i in range(kh):
            s = r * plan.strides[0] - plan.lo[0] + i * plan.dil[0]
            if 0 <= s < plan.hin:
                want[:, :, r, s] = wt[:, :, i]
    want = np.concatenate([want.reshape(c, mult * rows_out, plan.hin * kw),
                           np.repeat(bias.reshape(c, mult, 1), rows_out, axis=1).reshape(c, mult * rows_out, 1)],
                          axis=2)
    got = plan.weights(w, bias)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_banded_weights_without_bias_have_no_bias_column():
    plan = _depthwise.DepthwisePlan(1, 2, 1, (5, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), [5, 9],
                                    np.float32, mode="rows")
    w = RNG.standard_normal((2, 1, 3, 3)).astype(np.float32)
    got = plan.weights(w)
    assert got.shape == (2, 5, 5 * 3) and got.flags.c_contiguous
    assert np.array_equal(got.reshape(2, 5, 5, 3)[:, 1, 0:3], w[:, 0])  # output row 1 reads input rows 0-2


@pytest.mark.parametrize("mode,stride", [("cols", 1), ("cols", 2), ("rows", 1), ("rows", 2)])
def test_scratch_columns_made_empty_are_written_before_they_are_read(monkeypatch, mode, stride):
    """The im2col columns and product buffers are ``np.empty``: filled with NaN (the row of
    ones aside) before the run, the result is still the same, every read element written first."""
    monkeypatch.setattr(_depthwise, "MODE", mode)
    attrs = {"group": 6, "kernel_shape": [3, 3], "pads": [1, 1, 1, 2], "strides": [stride, stride]}
    x = RNG.standard_normal((1, 6, 7, 13)).astype(np.float32)
    w = RNG.standard_normal((12, 1, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(12).astype(np.float32)
    k = Conv(conv_node(attrs, x.shape, w, b))
    plan = k._dw_plan(x.shape, w.shape, np.dtype(np.float32))
    assert plan.mode == mode
    want = k(x, w, b)[0].copy()
    plan.warm(1)
    for scratch in plan._pool:
        cols = scratch.bufs[1]
        ones = cols.shape[1] - 1
        cols[:, :ones] = np.nan
        for extra in scratch.bufs[2:]:
            extra[...] = np.nan
    got = k(x, w, b)[0]
    assert np.array_equal(got, want)
    np.testing.assert_allclose(got, ort_conv(attrs, x, w, b), rtol=1e-4, atol=1e-4)


def test_warm_makes_the_views_of_a_shared_pool_once(monkeypatch):
    """Nodes of one geometry share the plan's scratch pool: the second node's warm-up finds
    every scratch set's views made and makes none; a set added later gets all of them."""
    attrs = {"group": 6, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    x = RNG.standard_normal((2, 6, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((6, 1, 3, 3)).astype(np.float32)
    plan = Conv(conv_node(attrs, x.shape, w, None))._dw_plan(x.shape, w.shape, np.dtype(np.float32))
    sizes = {(n1 - n0, c1 - c0) for n0, n1, c0, c1 in plan._pieces}
    plan.warm(1)
    second = plan.for_node()
    made = []
    real = type(plan)._views
    monkeypatch.setattr(type(plan), "_views", lambda self, s, ni, nc: made.append((ni, nc)) or real(self, s, ni, nc))
    second.warm(1)
    assert made == [] and all(set(s.views) == sizes for s in plan._pool)
    second.warm(2)  # one more set: its views, once per piece
    assert len(plan._pool) == 2 and len(made) == len(plan._pieces)
    assert all(set(s.views) == sizes and s.warmed for s in plan._pool)
