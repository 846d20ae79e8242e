"""The emulated NPU's fast host paths keep the chip's numerics bit for bit:
fp16 rounding without numpy casts, the bound program (fp32 shadow of the
fp16 workspace, widened weights) against the literal device-memory executor,
and the im2col/GEMM, depthwise and separable pooling kernels against direct
definitions."""
from __future__ import annotations

import gc
import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

pytest.importorskip("nnrt_npu_emu")

from conv_reference import conv_direct  # noqa: E402
from nnrt_core.backend import CompileOptions  # noqa: E402
from nnrt_core.frontends import load_onnx  # noqa: E402
from nnrt_core.registry import Registry  # noqa: E402
from nnrt_npu_emu.numerics import FP16_MAX, is_fp16_value, round_fp16  # noqa: E402
from nnrt_npu_emu.ops import spatial  # noqa: E402
from nnrt_npu_emu.ops.spatial import conv_nd, pool_nd  # noqa: E402
from nnrt_numpy import parallel  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    return Registry().backends["npu_emu"].backend


def _same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


# ------------------------------------------------------------ fp16 rounding
def _chip_store(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.clip(x, -FP16_MAX, FP16_MAX).astype(np.float16).astype(np.float32)


def test_round_fp16_is_the_saturating_cast_bit_for_bit():
    rng = np.random.default_rng(0)
    every_half = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    finite = every_half[np.isfinite(every_half)]
    mids = ((np.sort(finite)[:-1].astype(np.float64) + np.sort(finite)[1:]) / 2).astype(np.float32)  # ties
    with np.errstate(all="ignore"):
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 1e30, -1e30,
                            2.0 ** -24, 2.0 ** -25, -(2.0 ** -25), 2.0 ** -26, -(2.0 ** -26), 1e-45, -1e-45,
                            np.uint32(0x7FFFFFFF).view(np.float32), np.uint32(0xFFFFFFFF).view(np.float32)],
                           np.float32)
        cases = [rng.integers(0, 1 << 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                 (rng.standard_normal(500_000) * 10.0 ** rng.integers(-9, 6, 500_000)).astype(np.float32),
                 every_half, np.nextafter(finite, np.float32(np.inf)), np.nextafter(finite, -np.float32(np.inf)),
                 mids, -mids, special]
    for x in cases:
        want = _chip_store(x)
        got = round_fp16(x.copy())
        assert _same_bits(got, want).all(), x[~_same_bits(got, want)][:5]
    # the sign of zero is kept (numpy's cast keeps it too)
    assert np.signbit(round_fp16(np.array([-(2.0 ** -26)], np.float32)))[0]
    with pytest.raises(ValueError):
        round_fp16(np.zeros(3, np.float64))


def _positive_sweep() -> np.ndarray:
    """Every 97th positive float32 up to past FP16_MAX (all binades, subnormals of
    both formats), every fp16 value, its neighbours and the ties between them."""
    every_half = np.arange(1 << 15, dtype=np.uint16).view(np.float16).astype(np.float32)
    finite = np.sort(every_half[np.isfinite(every_half)])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    with np.errstate(all="ignore"):
        return np.concatenate([np.arange(0, 0x47800000, 97, dtype=np.uint32).view(np.float32), finite, mids,
                               np.nextafter(finite, np.float32(np.inf)), np.nextafter(mids, np.float32(0)),
                               np.array([np.nan, np.inf, 1e30, 65519.99, 65520], np.float32)])


@pytest.mark.parametrize("lo", [np.float32(1e-45), np.float32(2.0 ** -24), np.float32(0.5), np.float32(3.0)])
@pytest.mark.parametrize("layout", ["flat", "strided", "src"])
def test_round_fp16_with_a_positive_clamp_is_the_clamped_cast_bit_for_bit(lo, layout):
    """A positive lower bound (a fused Relu or Clip) takes the two-pass-shorter
    rounding: the same bits as clamping and casting, on views and from ``src``."""
    rng = np.random.default_rng(3)
    with np.errstate(all="ignore"):
        signed = (rng.standard_normal(100_000) * 10.0 ** rng.integers(-9, 6, 100_000)).astype(np.float32)
    for x in (_positive_sweep(), signed, -signed):
        want = _chip_store(np.clip(x, lo, FP16_MAX))
        if layout == "flat":
            got = round_fp16(x.copy(), None, lo)
        elif layout == "strided":  # a piece of a larger output: every other element
            big = np.zeros((x.size, 2), np.float32)
            big[:, 0] = x
            got = round_fp16(big[:, 0], np.empty(x.size, np.uint32), lo).copy()
            assert not big[:, 1].any()
        else:
            got = round_fp16(np.empty_like(x), None, lo, src=x)
        assert _same_bits(got, want).all(), x[~_same_bits(got, want)][:5]


def test_is_fp16_value():
    assert is_fp16_value(None) and is_fp16_value(0.0) and is_fp16_value(6.0) and is_fp16_value(-65504.0)
    assert not is_fp16_value(0.1) and not is_fp16_value(1e5) and not is_fp16_value(float("inf"))


# ------------------------------------------ bound program vs literal executor
def _zoo() -> onnx.ModelProto:
    """Many kernels, fp16-unfriendly constants (Clip 0.1, Pad 0.1) included."""
    rs = np.random.RandomState(3)

    def w(name, *shape, s=0.4):
        return nh.from_array((rs.randn(*shape) * s).astype(np.float32), name)

    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 2, 0, 1], strides=[1, 2]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("Conv", ["r1", "wd"], ["d1"], pads=[1, 1, 1, 1], group=8),  # depthwise
        h.make_node("Conv", ["d1", "wg", "bg"], ["g1"], group=2),  # grouped pointwise
        h.make_node("LeakyRelu", ["g1"], ["lk"], alpha=0.1),
        h.make_node("Clip", ["lk", "lo", "hi"], ["k1"]),
        h.make_node("MaxPool", ["k1"], ["m1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        h.make_node("AveragePool", ["k1"], ["a1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                    count_include_pad=1),
        h.make_node("Add", ["m1", "a1"], ["s1"]),
        h.make_node("Neg", ["s1"], ["l1"]),
        h.make_node("Pad", ["l1", "pads", "pv"], ["p1"]),
        h.make_node("ConvTranspose", ["p1", "wt"], ["t1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        h.make_node("Concat", ["t1", "t1"], ["cc"], axis=1),
        h.make_node("GlobalAveragePool", ["cc"], ["gp"]),
        h.make_node("Flatten", ["gp"], ["f"]),
        h.make_node("Gemm", ["f", "wf", "bf"], ["y0"], transB=1, alpha=0.7, beta=0.3),
        h.make_node("Softmax", ["y0"], ["y"]),
    ]
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("wd", 8, 1, 3, 3), w("wg", 6, 4, 1, 1), w("bg", 6),
             nh.from_array(np.array(0.1, np.float32), "lo"), nh.from_array(np.array(3.3, np.float32), "hi"),
             nh.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
             nh.from_array(np.array(0.1, np.float32), "pv"), w("wt", 6, 4, 3, 3), w("wf", 10, 8), w("bf", 10)]
    g = h.make_graph(nodes, "zoo", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 15, 17])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 10]),
                      h.make_tensor_value_info("cc", T.FLOAT, [2, 8, 17, 13]),
                      h.make_tensor_value_info("lk", T.FLOAT, [2, 6, 14, 9])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("chip", ["emu-npu-f16", "emu-fp32"])
def test_bound_program_matches_the_literal_executor(backend, chip, tmp_path):
    if chip == "emu-fp32":
        prof = tmp_path / "chips.toml"
        prof.write_text('[[chip]]\nname = "emu-fp32"\ndtypes = ["fp32"]\nmacs_per_cycle = {fp32 = 256}\n')
        backend.add_profiles(prof)
    model = load_onnx(_zoo())
    part = backend.compile(model.graph, CompileOptions(device=chip, precision="fp16" if chip == "emu-npu-f16" else "fp32"))
    kernels = {op["kernel"] for op in part.describe()["per_op"]}
    assert {"conv", "pool", "unary", "nary", "pad", "concat", "gemm", "softmax", "reduce"} <= kernels
    x = np.random.RandomState(4).randn(2, 3, 15, 17).astype(np.float32) * 3
    for _ in range(2):  # the second run reuses the bound program and its widened weights
        fast = {k: backend.to_host(v) for k, v in part.run({"x": x}).items()}
        slow = part.run_reference({"x": x})
        for name in part.output_names:
            assert fast[name].dtype == slow[name].dtype
            assert _same_bits(fast[name], slow[name]).all(), name
    # cycles come from the cost model, not from the host
    assert part.last_profile["cycles"] == part.estimate["cycles"]


def test_fp16_weights_widened_once_device_accounting_unchanged(backend):
    model = load_onnx(_zoo())
    arena = backend.device("emu-npu-f16").arena
    gc.collect()  # partitions of earlier tests give their device memory back
    before = arena.in_use
    part = backend.compile(model.graph, CompileOptions(precision="fp16", device="emu-npu-f16"))
    loaded = arena.in_use - before
    assert loaded >= part.program.const_size + part.program.ws_size  # weights + workspace in device memory
    x = np.zeros((2, 3, 15, 17), np.float32)
    for _ in range(3):
        part.run({"x": x})
    gc.collect()
    assert arena.in_use - before == loaded  # runs keep no device memory (the idle queue holds no finished job)
    fp16_const = sum(int(np.prod(o.shape)) * 2 for i in part.program.instrs for o in i.ins
                     if o is not None and o.space == "const" and o.dtype == "float16")
    assert fp16_const > 0
    assert 0 < part.bound.widened_bytes <= 2 * fp16_const  # each fp16 constant widened once (host memory)


# ------------------------------------------------------------ host kernels
CONVS = [  # (N, C, H, W), (M, C/g, kh, kw), strides, pads (t, l, b, r), dilations, group
    ((1, 3, 11, 13), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 4, 12, 9), (6, 2, 3, 2), (2, 1), (0, 1, 2, 0), (1, 2), 2),
    ((1, 6, 10, 10), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),  # depthwise
    ((2, 6, 9, 8), (6, 1, 3, 3), (2, 2), (0, 1, 1, 0), (2, 1), 6),  # depthwise, strided, dilated
    ((1, 4, 7, 7), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),  # depthwise, 2 filters per channel
    ((1, 8, 9, 9), (12, 2, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 4),  # grouped pointwise, strided
    ((1, 5, 6, 40), (7, 5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (-1, 1, 1, -1), (1, 1), 1),  # negative pads crop
]


@pytest.mark.parametrize("case", CONVS)
def test_conv_nd_matches_the_definition(case):
    xs, ws, strides, pads, dil, group = case
    rs = np.random.RandomState(sum(xs) + sum(ws))
    x, w = rs.randn(*xs).astype(np.float32), rs.randn(*ws).astype(np.float32)
    if min(pads) < 0:  # the definition crops first
        ref = conv_direct(x[:, :, 1:, :-1], w, strides, [0, pads[1], pads[2], 0], dil, group)
    else:
        ref = conv_direct(x, w, strides, pads, dil, group)
    got = conv_nd(x, w, strides, pads, dil, group)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # exact integers in float64 (the int8 kernels' accumulators) stay exact
    xi, wi = np.rint(x * 20), np.rint(w * 20)
    assert np.array_equal(conv_nd(xi, wi, strides, pads, dil, group),
                          np.rint(conv_direct(xi, wi, strides, pads, dil, group)) if min(pads) >= 0 else
                          np.rint(conv_direct(xi[:, :, 1:, :-1], wi, strides, [0, pads[1], pads[2], 0], dil, group)))
    # writing into a given output gives the same values (fp16 input widened inside the copies)
    out = np.empty(ref.shape, np.float32)
    assert conv_nd(x.astype(np.float16), w, strides, pads, dil, group, out=out) is out
    np.testing.assert_array_equal(out, conv_nd(x.astype(np.float16).astype(np.float32), w, strides, pads, dil, group))


def test_conv_pieces_do_not_depend_on_threads(monkeypatch):
    monkeypatch.setattr(spatial, "PIECE_MACS", 20_000)
    monkeypatch.setattr(spatial, "COLS_CHUNK_BYTES", 4096)
    rs = np.random.RandomState(0)
    cases = [(rs.randn(2, 16, 21, 19).astype(np.float32), rs.randn(24, 8, 3, 3).astype(np.float32), 2),  # rows
             (rs.randn(1, 64, 3, 3).astype(np.float32), rs.randn(256, 64, 3, 3).astype(np.float32), 1)]  # channels
    for x, w, group in cases:
        prev = parallel.set_threads(1)
        try:
            one = conv_nd(x, w, [1, 1], [1, 1, 1, 1], [1, 1], group)
            parallel.set_threads(2)
            two = conv_nd(x, w, [1, 1], [1, 1, 1, 1], [1, 1], group)
        finally:
            parallel.set_threads(*prev)
        assert np.array_equal(one, two)
        np.testing.assert_allclose(one, conv_direct(x, w, (1, 1), (1, 1, 1, 1), (1, 1), group), rtol=1e-4, atol=1e-4)


def _pool_direct(x, kind, k, strides, pads, osz, include_pad):
    N, C, H, W = x.shape
    y = np.zeros((N, C) + tuple(osz))
    for i, j in itertools.product(range(osz[0]), range(osz[1])):
        r0, c0 = i * strides[0] - pads[0], j * strides[1] - pads[1]
        r1, c1 = r0 + k[0], c0 + k[1]
        win = x[:, :, max(r0, 0):min(r1, H), max(c0, 0):min(c1, W)].astype(np.float64)
        if kind == "max":
            y[:, :, i, j] = win.max(axis=(2, 3))
        else:
            if include_pad:  # explicit padding counts, beyond it (ceil mode) does not
                cnt = (min(r1, H + pads[2]) - r0) * (min(c1, W + pads[3]) - c0)
            else:
                cnt = win.shape[2] * win.shape[3]
            y[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return y


@pytest.mark.parametrize("kind,include_pad", [("max", False), ("avg", False), ("avg", True)])
def test_pool_nd_matches_the_definition(kind, include_pad):
    x = np.random.RandomState(1).randn(2, 3, 11, 10).astype(np.float32)
    for k, strides, pads, osz in [([3, 3], [2, 2], [1, 1, 1, 1], [6, 5]), ([2, 3], [2, 1], [0, 1, 0, 1], [5, 10]),
                                  ([3, 3], [2, 2], [0, 0, 0, 0], [6, 5])]:  # the last: ceil mode
        got = pool_nd(x, kind, k, strides, pads, [1, 1], osz, include_pad)
        np.testing.assert_allclose(got, _pool_direct(x, kind, k, strides, pads, osz, include_pad), rtol=1e-6,
                                   atol=1e-6)
    x16 = x.astype(np.float16)
    assert pool_nd(x16, "max", [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], [6, 5], False).dtype == np.float16  # exact


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("shape,k,strides,pads,osz", [
    ((1, 5, 7, 7), [7, 7], [1, 1], [0, 0, 0, 0], [1, 1]),  # global: one reduction
    ((2, 3, 9, 8), [3, 2], [1, 1], [1, 0, 1, 1], [9, 8]),  # stride 1, padding on some sides
    ((1, 4, 14, 14), [3, 3], [2, 2], [1, 1, 1, 1], [7, 7]),  # ShuffleNet's shortcut pool
    ((1, 2, 12, 10), [2, 2], [3, 3], [0, 0, 0, 0], [4, 4]),  # stride > kernel: input rows skipped
    ((1, 2, 11, 11), [3, 3], [2, 2], [0, 0, 0, 0], [6, 6]),  # ceil mode: the last windows overhang
])
def test_separable_pool_matches_the_definition_in_every_storage_type(kind, shape, k, strides, pads, osz):
    """Separable pooling without a padded copy: the definition (fp32 sums up to
    rounding), the same bits from fp16 storage as from its fp32 shadow, max
    pooling exact in int8, results written into ``out`` when given."""
    x = np.random.RandomState(2).randn(*shape).astype(np.float32)
    want = _pool_direct(x, kind, k, strides, pads, osz, False)
    got = pool_nd(x, kind, k, strides, pads, [1, 1], osz, False)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    x16 = x.astype(np.float16)
    from16 = pool_nd(x16, kind, k, strides, pads, [1, 1], osz, False)
    shadow = pool_nd(x16.astype(np.float32), kind, k, strides, pads, [1, 1], osz, False)
    assert np.array_equal(from16.astype(np.float32).view(np.uint32), shadow.view(np.uint32))
    if kind == "max":
        q = np.random.RandomState(3).randint(-128, 128, shape).astype(np.int8)
        got8 = pool_nd(q, "max", k, strides, pads, [1, 1], osz, False)
        assert got8.dtype == np.int8
        assert np.array_equal(got8, _pool_direct(q.astype(np.float32), "max", k, strides, pads, osz, False))
    else:
        out = np.full(want.shape, np.nan, np.float32)
        assert pool_nd(x, kind, k, strides, pads, [1, 1], osz, False, out=out) is out
        assert np.array_equal(out, got)


def _fresh_depthwise(x, w, strides, pads, dil):
    """The depthwise product on a freshly padded input and freshly built
    im2col columns (the kernel before its scratch was pooled)."""
    sp = x.ndim - 2
    xp = np.zeros(x.shape[:2] + tuple(x.shape[2 + i] + max(pads[i], 0) + max(pads[sp + i], 0)
                                      for i in range(sp)), np.float32)
    xp[(slice(None), slice(None)) + tuple(slice(max(pads[i], 0), max(pads[i], 0) + x.shape[2 + i])
                                          for i in range(sp))] = x
    xp = xp[(slice(None), slice(None)) + tuple(slice(max(-pads[i], 0), xp.shape[2 + i] - max(-pads[sp + i], 0))
                                               for i in range(sp))]
    k = w.shape[2:]
    eff = [(k[i] - 1) * dil[i] + 1 for i in range(sp)]
    osz = [(xp.shape[2 + i] - eff[i]) // strides[i] + 1 for i in range(sp)]
    win = np.lib.stride_tricks.sliding_window_view(xp, eff, axis=(2, 3))
    win = win[:, :, ::strides[0], ::strides[1], ::dil[0], ::dil[1]][:, :, :osz[0], :osz[1]]
    cols = np.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3)).reshape(x.shape[0], x.shape[1], -1, osz[0] * osz[1])
    y = np.matmul(w.reshape(x.shape[1], 1, -1).astype(np.float32), cols)
    return y.reshape(x.shape[:2] + tuple(osz))


@pytest.mark.parametrize("shape,strides,pads,dil", [
    ((1, 136, 28, 28), (1, 1), (1, 1, 1, 1), (1, 1)),  # ShuffleNet's stride-1 depthwise layers
    ((1, 112, 56, 56), (2, 2), (1, 1, 1, 1), (1, 1)),  # ... and its strided one
    ((2, 6, 40, 31), (1, 2), (0, 2, 1, 0), (2, 1)),  # batch 2, asymmetric pads, dilated
    ((1, 5, 30, 30), (1, 1), (-1, 1, 1, -1), (1, 1)),  # negative pads crop (no pooled scratch)
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pooled_depthwise_scratch_gives_the_fresh_im2col_bits(shape, strides, pads, dil, dtype, monkeypatch):
    """Depthwise convolutions with many output pixels build their columns in
    pooled scratch: bit for bit the product on fresh buffers, run after run
    (the pooled padding stays zero), from fp16 storage too, pooled or not."""
    rng = np.random.RandomState(4)
    w = rng.randn(shape[1], 1, 3, 3).astype(np.float32)
    for cap in (spatial.SCRATCH_BYTES, 0):
        monkeypatch.setattr(spatial, "SCRATCH_BYTES", cap)
        for _ in range(3):  # new values each time through the same scratch
            x = rng.randn(*shape).astype(dtype)
            want = _fresh_depthwise(x.astype(np.float32), w, strides, pads, dil)
            assert want.shape[2] * want.shape[3] >= spatial.DEPTHWISE_MATMUL_PIXELS
            got = conv_nd(x, w, strides, pads, dil, shape[1])
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    if min(pads) >= 0:  # (the definition pads only)
        np.testing.assert_allclose(got, conv_direct(x.astype(np.float32), w, strides, pads, dil, shape[1]),
                                   rtol=1e-4, atol=1e-4)
