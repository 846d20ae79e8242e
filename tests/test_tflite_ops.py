"""Per-operator conformance of the TFLite frontend against the LiteRT interpreter,
on every shipped backend (NumPy, ONNX Runtime and OpenVINO within 1e-5 of max |ref|,
the emulated NPU within fp16 tolerance).  Models are written in code."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert")

from tflite_models import TFLiteWriter, litert_run  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402

#: the OpenVINO backend where its plugin is installed: TFLite imports take the same path as ONNX files
BACKENDS = {"numpy": 1e-5, "onnxruntime": 1e-5, "npu_emu": 2e-2,
            **({"openvino": 1e-5} if importlib.util.find_spec("nnrt_openvino") else {})}
F32 = np.float32


def _rand(*shape: int, seed: int = 0, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).uniform(lo, hi, shape).astype(F32)


def check(model: bytes, feeds: dict[str, np.ndarray], backends: dict[str, float] = BACKENDS,
          level: str = "all") -> Session:
    """Run ``model`` on LiteRT and on each backend; compare every output."""
    refs = litert_run(model, list(feeds.values()))
    sess = None
    for be, tol in backends.items():
        sess = Session(model, ScheduleConfig(backends=[be], optimization_level=level))
        outs = list(sess.run(feeds).values())
        if be == "openvino":  # it takes the imported partitions itself, not through the backup
            assert any(p.backend == be for p in sess.placement_report), (be, "ran no node")
        assert len(outs) == len(refs)
        for got, ref in zip(outs, refs):
            assert got.shape == ref.shape and got.dtype == ref.dtype, (be, got.shape, ref.shape, got.dtype, ref.dtype)
            scale = max(float(np.abs(ref.astype(np.float64)).max()), 1e-6)
            err = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
            assert err <= tol * scale + (1e-6 if ref.dtype.kind == "f" else 0), (be, err, scale)
    return sess


def unary_model(op: str, shape: list[int], options: str | None = None, **fields) -> bytes:
    w = TFLiteWriter()
    x = w.input("x", shape)
    y = w.tensor("y", shape)
    w.op(op, [x], [y], options, **fields)
    w.outputs = [y]
    return w.build()


# ------------------------------------------------------------- convolutions
CONV_CASES = [  # (in NHWC, filter OHWI, stride, padding 0=SAME 1=VALID, dilation, activation)
    ([1, 9, 9, 3], [4, 3, 3, 3], 1, 0, 1, 0),
    ([1, 9, 9, 3], [4, 3, 3, 3], 2, 0, 1, 1),
    ([1, 10, 8, 3], [5, 3, 3, 3], 2, 0, 1, 3),
    ([1, 10, 8, 3], [5, 2, 2, 3], 2, 0, 1, 0),
    ([2, 7, 7, 4], [6, 3, 3, 4], 1, 1, 1, 2),
    ([1, 11, 11, 2], [3, 3, 3, 2], 1, 0, 2, 2),
    ([1, 8, 8, 4], [4, 3, 3, 2], 1, 0, 1, 0),  # grouped (2 groups)
    ([1, 5, 5, 8], [16, 1, 1, 8], 1, 1, 1, 3),
]


@pytest.mark.parametrize("xs,ws,stride,padding,dil,act", CONV_CASES)
def test_conv_2d(xs, ws, stride, padding, dil, act):
    w = TFLiteWriter()
    x = w.input("x", xs)
    wt = w.const("w", _rand(*ws, seed=1))
    b = w.const("b", _rand(ws[0], seed=2))
    eff = (ws[1] - 1) * dil + 1, (ws[2] - 1) * dil + 1
    oh, ow = ((-(-xs[1] // stride), -(-xs[2] // stride)) if padding == 0 else
              ((xs[1] - eff[0]) // stride + 1, (xs[2] - eff[1]) // stride + 1))
    y = w.tensor("y", [xs[0], oh, ow, ws[0]])
    w.op("CONV_2D", [x, wt, b], [y], "Conv2DOptions", Padding=padding, StrideW=stride, StrideH=stride,
         DilationWFactor=dil, DilationHFactor=dil, FusedActivationFunction=act)
    w.outputs = [y]
    check(w.build(), {"x": _rand(*xs)})


@pytest.mark.parametrize("xs,k,mult,stride,padding,act", [
    ([1, 9, 9, 4], 3, 1, 1, 0, 3), ([1, 10, 10, 3], 3, 2, 2, 0, 1), ([1, 8, 7, 2], 5, 1, 2, 1, 0),
    ([1, 6, 6, 3], 2, 1, 2, 0, 2)])
def test_depthwise_conv_2d(xs, k, mult, stride, padding, act):
    w = TFLiteWriter()
    c = xs[3] * mult
    x = w.input("x", xs)
    wt = w.const("w", _rand(1, k, k, c, seed=3))
    b = w.const("b", _rand(c, seed=4))
    oh, ow = ((-(-xs[1] // stride), -(-xs[2] // stride)) if padding == 0 else
              ((xs[1] - k) // stride + 1, (xs[2] - k) // stride + 1))
    y = w.tensor("y", [1, oh, ow, c])
    w.op("DEPTHWISE_CONV_2D", [x, wt, b], [y], "DepthwiseConv2DOptions", Padding=padding, StrideW=stride,
         StrideH=stride, DepthMultiplier=mult, DilationWFactor=1, DilationHFactor=1, FusedActivationFunction=act)
    w.outputs = [y]
    check(w.build(), {"x": _rand(*xs)})


@pytest.mark.parametrize("xs,cout,k,stride,padding", [
    ([1, 4, 4, 3], 2, 3, 2, 0), ([1, 5, 5, 2], 3, 3, 2, 1), ([1, 4, 6, 2], 4, 2, 2, 0), ([1, 3, 3, 4], 2, 3, 1, 0)])
def test_transpose_conv(xs, cout, k, stride, padding):
    w = TFLiteWriter()
    oh = xs[1] * stride if padding == 0 else (xs[1] - 1) * stride + k
    ow = xs[2] * stride if padding == 0 else (xs[2] - 1) * stride + k
    shape = w.const("shape", np.array([1, oh, ow, cout], np.int32))
    wt = w.const("w", _rand(cout, k, k, xs[3], seed=5))
    x = w.input("x", xs)
    b = w.const("b", _rand(cout, seed=6))
    y = w.tensor("y", [1, oh, ow, cout])
    w.op("TRANSPOSE_CONV", [shape, wt, x, b], [y], "TransposeConvOptions", Padding=padding, StrideW=stride,
         StrideH=stride)
    w.outputs = [y]
    check(w.build(), {"x": _rand(*xs)})


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("xs,k,stride,padding,act", [
    ([1, 9, 9, 3], 3, 2, 0, 0), ([1, 8, 8, 2], 2, 2, 1, 1), ([1, 7, 10, 2], 3, 1, 0, 3), ([2, 6, 6, 1], 6, 1, 1, 0)])
def test_pool_2d(op, xs, k, stride, padding, act):
    oh, ow = ((-(-xs[1] // stride), -(-xs[2] // stride)) if padding == 0 else
              ((xs[1] - k) // stride + 1, (xs[2] - k) // stride + 1))
    w = TFLiteWriter()
    x = w.input("x", xs)
    y = w.tensor("y", [xs[0], oh, ow, xs[3]])
    w.op(op, [x], [y], "Pool2DOptions", Padding=padding, StrideW=stride, StrideH=stride, FilterWidth=k,
         FilterHeight=k, FusedActivationFunction=act)
    w.outputs = [y]
    check(w.build(), {"x": _rand(*xs, lo=-2, hi=2)})


@pytest.mark.parametrize("xs,keep", [([2, 12], False), ([1, 2, 3, 8], True), ([1, 2, 3, 8], False)])
def test_fully_connected(xs, keep):
    w = TFLiteWriter()
    x = w.input("x", xs)
    wt = w.const("w", _rand(5, xs[-1], seed=7))
    b = w.const("b", _rand(5, seed=8))
    rows = int(np.prod(xs)) // xs[-1]
    y = w.tensor("y", (xs[:-1] + [5]) if keep else [rows, 5])
    w.op("FULLY_CONNECTED", [x, wt, b], [y], "FullyConnectedOptions", FusedActivationFunction=1, KeepNumDims=keep)
    w.outputs = [y]
    check(w.build(), {"x": _rand(*xs)})


# ------------------------------------------------------------- element-wise
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV"])
@pytest.mark.parametrize("act", [0, 1, 2, 3])
def test_binary_fused_activation(op, act):
    w = TFLiteWriter()
    a = w.input("a", [1, 4, 4, 3])
    b = w.input("b", [1, 1, 4, 3])
    y = w.tensor("y", [1, 4, 4, 3])
    w.op(op, [a, b], [y], f"{op.capitalize()}Options", FusedActivationFunction=act)
    w.outputs = [y]
    check(w.build(), {"a": _rand(1, 4, 4, 3, lo=-3, hi=3), "b": _rand(1, 1, 4, 3, lo=0.5, hi=2)})


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"])
def test_binary_broadcast_const(op):
    w = TFLiteWriter()
    a = w.input("a", [2, 3, 4])
    c = w.const("c", _rand(4, seed=9))
    y = w.tensor("y", [2, 3, 4])
    w.op(op, [a, c], [y])
    w.outputs = [y]
    check(w.build(), {"a": _rand(2, 3, 4)})


@pytest.mark.parametrize("op,lo,hi", [
    ("LOGISTIC", -4, 4), ("TANH", -3, 3), ("RELU", -2, 2), ("RELU6", -2, 8), ("RELU_N1_TO_1", -2, 2),
    ("HARD_SWISH", -5, 5), ("ABS", -2, 2), ("NEG", -2, 2), ("EXP", -2, 2), ("LOG", 0.1, 4), ("SQRT", 0, 4),
    ("RSQRT", 0.2, 4)])
def test_unary(op, lo, hi):
    check(unary_model(op, [1, 3, 4, 5]), {"x": _rand(1, 3, 4, 5, lo=lo, hi=hi)})


@pytest.mark.parametrize("op", ["CONV_2D", "ADD"])
def test_fused_tanh_is_refused_not_guessed(op):
    """LiteRT's kernels skip a fused TANH (they only clamp): refused with the reason."""
    from nnrt_core.errors import UnsupportedNodeError
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 4, 2])
    y = w.tensor("y", [1, 4, 4, 2])
    if op == "CONV_2D":
        w.op(op, [x, w.const("w", _rand(2, 1, 1, 2)), w.const("b", _rand(2))], [y], "Conv2DOptions", Padding=0,
             StrideW=1, StrideH=1, FusedActivationFunction=4)
    else:
        w.op(op, [x, x], [y], "AddOptions", FusedActivationFunction=4)
    w.outputs = [y]
    with pytest.raises(UnsupportedNodeError, match=r"operator 0 \(%s\).*TANH" % op):
        Session(w.build())


def test_leaky_relu():
    check(unary_model("LEAKY_RELU", [2, 7], "LeakyReluOptions", Alpha=0.2), {"x": _rand(2, 7)})


def test_prelu_after_conv_stays_nchw():
    w = TFLiteWriter()
    x = w.input("x", [1, 6, 6, 3])
    wt = w.const("w", _rand(4, 3, 3, 3, seed=10))
    y = w.tensor("y", [1, 6, 6, 4])
    w.op("CONV_2D", [x, wt, w.const("b", np.zeros(4, F32))], [y], "Conv2DOptions", Padding=0, StrideW=1, StrideH=1)
    alpha = w.const("alpha", _rand(1, 1, 4, seed=11, lo=0, hi=0.5))
    z = w.tensor("z", [1, 6, 6, 4])
    w.op("PRELU", [y, alpha], [z])
    w.outputs = [z]
    sess = check(w.build(), {"x": _rand(1, 6, 6, 3)})
    assert [n.op_type for n in sess.graph.nodes].count("Transpose") == 2  # one at each boundary


def test_softmax_beta():
    check(unary_model("SOFTMAX", [3, 10], "SoftmaxOptions", Beta=0.5), {"x": _rand(3, 10, lo=-4, hi=4)})


def test_l2_normalization():
    check(unary_model("L2_NORMALIZATION", [2, 3, 6], "L2NormOptions"), {"x": _rand(2, 3, 6)})


# ------------------------------------------------------------- shapes and data movement
def test_concat_pad_mean_chain_in_nchw():
    """conv -> concat (channels) -> pad -> mean over H,W: one Transpose at the input, none after the mean."""
    w = TFLiteWriter()
    x = w.input("x", [1, 6, 6, 2])
    y1, y2 = w.tensor("y1", [1, 6, 6, 3]), w.tensor("y2", [1, 6, 6, 3])
    for y, s in ((y1, 12), (y2, 13)):
        w.op("CONV_2D", [x, w.const(f"w{s}", _rand(3, 3, 3, 2, seed=s)), w.const(f"b{s}", _rand(3, seed=s))], [y], "Conv2DOptions", Padding=0,
             StrideW=1, StrideH=1)
    c = w.tensor("c", [1, 6, 6, 6])
    w.op("CONCATENATION", [y1, y2], [c], "ConcatenationOptions", Axis=3)
    p = w.tensor("p", [1, 8, 7, 6])
    w.op("PAD", [c, w.const("pads", np.array([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32))], [p])
    m = w.tensor("m", [1, 6])
    w.op("MEAN", [p, w.const("axes", np.array([1, 2], np.int32))], [m], "ReducerOptions", KeepDims=False)
    w.outputs = [m]
    sess = check(w.build(), {"x": _rand(1, 6, 6, 2)})
    assert [n.op_type for n in sess.graph.nodes].count("Transpose") == 1


@pytest.mark.parametrize("op,keep,axes", [("MEAN", True, [1, 2]), ("SUM", False, [2]), ("REDUCE_MAX", True, [-1]),
                                          ("SUM", True, [0, 3]), ("REDUCE_MIN", False, [1, 2]),
                                          ("REDUCE_PROD", True, [3])])
def test_reduce(op, keep, axes):
    shape = [2, 3, 4, 5]
    out = [1 if i in [a % 4 for a in axes] else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in [a % 4 for a in axes]]
    w = TFLiteWriter()
    x = w.input("x", shape)
    y = w.tensor("y", out)
    w.op(op, [x, w.const("axes", np.array(axes, np.int32))], [y], "ReducerOptions", KeepDims=keep)
    w.outputs = [y]
    check(w.build(), {"x": _rand(*shape)})


@pytest.mark.parametrize("op,out", [("RESHAPE", [4, 6]), ("SQUEEZE", [2, 3, 4]), ("EXPAND_DIMS", [2, 3, 4, 1])])
def test_reshape_family(op, out):
    w = TFLiteWriter()
    x = w.input("x", [2, 3, 1, 4] if op == "SQUEEZE" else [2, 3, 4])
    y = w.tensor("y", out)
    extra = [w.const("s", np.array(out, np.int32))] if op == "RESHAPE" else \
        [w.const("a", np.array(3, np.int32))] if op == "EXPAND_DIMS" else []
    w.op(op, [x, *extra], [y])
    w.outputs = [y]
    check(w.build(), {"x": _rand(2, 3, 1, 4) if op == "SQUEEZE" else _rand(2, 3, 4)})


@pytest.mark.parametrize("op", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [[7, 9], [3, 2]])
def test_resize(op, align, half, size):
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 5, 2])
    y = w.tensor("y", [1, *size, 2])
    opts = "ResizeBilinearOptions" if op == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
    w.op(op, [x, w.const("size", np.array(size, np.int32))], [y], opts, AlignCorners=align, HalfPixelCenters=half)
    w.outputs = [y]
    check(w.build(), {"x": _rand(1, 4, 5, 2)})


def test_transpose():
    w = TFLiteWriter()
    x = w.input("x", [2, 3, 4])
    y = w.tensor("y", [4, 2, 3])
    w.op("TRANSPOSE", [x, w.const("perm", np.array([2, 0, 1], np.int32))], [y])
    w.outputs = [y]
    check(w.build(), {"x": _rand(2, 3, 4)})


@pytest.mark.parametrize("begin,end,strides,bm,em,sm,out", [
    ([0, 1, 0], [2, 3, 4], [1, 1, 2], 0, 0, 0, [2, 2, 2]),
    ([1, 0, 0], [2, 3, 4], [1, 1, 1], 0, 0, 1, [3, 4]),
    ([0, -1, 3], [0, 0, 0], [1, -1, -1], 1, 7, 0, [2, 3, 4]),
    ([-1, 0, 1], [0, 2, 0], [1, 1, 1], 0, 4, 1, [2, 3]),
])
def test_strided_slice(begin, end, strides, bm, em, sm, out):
    w = TFLiteWriter()
    x = w.input("x", [2, 3, 4])
    y = w.tensor("y", out)
    consts = [w.const(n, np.array(v, np.int32)) for n, v in (("b", begin), ("e", end), ("s", strides))]
    w.op("STRIDED_SLICE", [x, *consts], [y], "StridedSliceOptions", BeginMask=bm, EndMask=em, ShrinkAxisMask=sm)
    w.outputs = [y]
    check(w.build(), {"x": _rand(2, 3, 4)})


def test_slice_and_gather():
    w = TFLiteWriter()
    x = w.input("x", [4, 5, 3])
    s = w.tensor("s", [2, 5, 2])
    w.op("SLICE", [x, w.const("b", np.array([1, 0, 1], np.int32)), w.const("z", np.array([2, -1, 2], np.int32))],
         [s])
    g = w.tensor("g", [2, 3, 2])
    w.op("GATHER", [s, w.const("i", np.array([4, 0, 2], np.int32))], [g], "GatherOptions", Axis=1)
    w.outputs = [g]
    check(w.build(), {"x": _rand(4, 5, 3)})


def test_split_split_v_pack_unpack():
    w = TFLiteWriter()
    x = w.input("x", [2, 6, 3])
    a, b, c = (w.tensor(n, [2, 2, 3]) for n in "abc")
    w.op("SPLIT", [w.const("ax", np.array(1, np.int32)), x], [a, b, c], "SplitOptions", NumSplits=3)
    d, e = w.tensor("d", [2, 1, 3]), w.tensor("e", [2, 5, 3])
    w.op("SPLIT_V", [x, w.const("sz", np.array([1, 5], np.int32)), w.const("ax2", np.array(1, np.int32))], [d, e],
         "SplitVOptions", NumSplits=2)
    p = w.tensor("p", [2, 3, 2, 3])
    w.op("PACK", [a, b, c], [p], "PackOptions", ValuesCount=3, Axis=1)
    u0, u1 = w.tensor("u0", [6, 3]), w.tensor("u1", [6, 3])
    w.op("UNPACK", [x], [u0, u1], "UnpackOptions", Num=2, Axis=0)
    w.outputs = [p, d, e, u1]
    check(w.build(), {"x": _rand(2, 6, 3)})


@pytest.mark.parametrize("adj_x,adj_y", [(False, False), (True, False), (False, True)])
def test_batch_matmul(adj_x, adj_y):
    w = TFLiteWriter()
    a = w.input("a", [2, 4, 3] if adj_x else [2, 3, 4])
    b = w.input("b", [2, 5, 4] if adj_y else [2, 4, 5])
    y = w.tensor("y", [2, 3, 5])
    w.op("BATCH_MATMUL", [a, b], [y], "BatchMatMulOptions", AdjX=adj_x, AdjY=adj_y)
    w.outputs = [y]
    check(w.build(), {"a": _rand(2, 4, 3) if adj_x else _rand(2, 3, 4), "b": _rand(2, 5, 4) if adj_y else _rand(2, 4, 5)})


def test_cast_shape_arg_max():
    w = TFLiteWriter()
    x = w.input("x", [3, 7])
    am = w.tensor("am", [3], np.int32)
    w.op("ARG_MAX", [x, w.const("ax", np.array([1], np.int32))], [am], "ArgMaxOptions", OutputType=2)
    c = w.tensor("c", [3], np.float32)
    w.op("CAST", [am], [c])
    s = w.tensor("s", [2], np.int32)
    w.op("SHAPE", [x], [s], "ShapeOptions", OutType=2)
    w.outputs = [c, am, s]
    check(w.build(), {"x": _rand(3, 7)}, backends={"numpy": 0, "onnxruntime": 0})


@pytest.mark.parametrize("op", ["SPACE_TO_DEPTH", "DEPTH_TO_SPACE"])
def test_space_depth(op):
    xs, ys = ([1, 4, 6, 2], [1, 2, 3, 8]) if op == "SPACE_TO_DEPTH" else ([1, 2, 3, 8], [1, 4, 6, 2])
    w = TFLiteWriter()
    x = w.input("x", xs)
    y = w.tensor("y", ys)
    w.op(op, [x], [y], "SpaceToDepthOptions" if op == "SPACE_TO_DEPTH" else "DepthToSpaceOptions", BlockSize=2)
    w.outputs = [y]
    check(w.build(), {"x": _rand(*xs)})


def test_padv2_and_fp16_weights_behind_dequantize():
    w = TFLiteWriter()
    x = w.input("x", [1, 5, 5, 2])
    p = w.tensor("p", [1, 7, 7, 2])
    w.op("PADV2", [x, w.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)),
                   w.const("v", np.array(0.5, F32))], [p])
    w16 = w.const("w16", _rand(3, 3, 3, 2, seed=14).astype(np.float16))
    wf = w.tensor("wf", [3, 3, 3, 2])
    w.op("DEQUANTIZE", [w16], [wf])
    y = w.tensor("y", [1, 5, 5, 3])
    w.op("CONV_2D", [p, wf, w.const("b", np.zeros(3, F32))], [y], "Conv2DOptions", Padding=1, StrideW=1, StrideH=1)
    w.outputs = [y]
    check(w.build(), {"x": _rand(1, 5, 5, 2)})


@pytest.mark.parametrize("fp16", [False, True])
def test_a_mobilenet_shaped_model_runs_in_nchw_with_one_transpose(fp16):
    """conv / depthwise-separable blocks / mean / fully connected / softmax: the whole
    body in NCHW, one Transpose at the input, the same results as LiteRT."""
    from tflite_models import mobilenet_like
    model = mobilenet_like(size=64, width=8, blocks=6, classes=50, fp16=fp16)
    sess = check(model, {"input": _rand(1, 64, 64, 3, lo=0, hi=1)})
    assert [n.op_type for n in sess.graph.nodes].count("Transpose") == 1


@pytest.mark.parametrize("mode", [0, 1])  # MirrorPadMode REFLECT, SYMMETRIC
@pytest.mark.parametrize("after_conv", [False, True])
def test_mirror_pad(mode, after_conv):
    """MIRROR_PAD on a plain 3-D tensor (basic-pitch pads its frames so) and in NCHW after a conv;
    SYMMETRIC pads reach the whole dimension (3 on a side of 3), REFLECT one less."""
    w = TFLiteWriter()
    if after_conv:
        x = w.input("x", [1, 3, 4, 2])
        c = w.tensor("c", [1, 3, 4, 3])
        w.op("CONV_2D", [x, w.const("w", _rand(3, 1, 1, 2, seed=21)), w.const("b", _rand(3, seed=21))], [c],
             "Conv2DOptions", Padding=0, StrideW=1, StrideH=1)
        pads, shape = [[0, 0], [2 + mode, 1], [0, 3], [0, 0]], [1, 3, 4, 3]
    else:
        c = x = w.input("x", [2, 3, 5])
        pads, shape = [[1, 0], [2 + mode, 1], [0, 4 - (1 - mode)]], [2, 3, 5]
    y = w.tensor("y", [d + a + b for d, (a, b) in zip(shape, pads)])
    w.op("MIRROR_PAD", [c, w.const("pads", np.array(pads, np.int32))], [y], "MirrorPadOptions", Mode=mode)
    w.outputs = [y]
    sess = check(w.build(), {"x": _rand(*w.tensors[x]["shape"])})
    ops = [n.op_type for n in sess.graph.nodes]
    assert ("Pad" in ops) == (mode == 0) and ("Slice" in ops) == (mode == 1), ops


def test_mirror_pad_beyond_the_dimension_is_declined_naming_the_operator():
    from nnrt_core.errors import UnsupportedNodeError
    w = TFLiteWriter()
    x = w.input("x", [1, 3, 4])
    y = w.tensor("y", [1, 9, 4])
    w.op("MIRROR_PAD", [x, w.const("pads", np.array([[0, 0], [3, 3], [0, 0]], np.int32))], [y],
         "MirrorPadOptions", Mode=0)  # REFLECT needs pads < 3 here
    w.outputs = [y]
    with pytest.raises(UnsupportedNodeError, match=r"MIRROR_PAD.*REFLECT paddings \[3, 3\] on axis 1"):
        Session(w.build(), ScheduleConfig(backends=["numpy"]))
