"""The emulated NPU's host-side store fusion keeps the chip's numerics bit for
bit: an exact activation applied in the clamp of the fp16 store before it,
convolutions rounding each finished piece of their output (bias first), and
the batched grouped / depthwise convolution kernels against the definition."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

pytest.importorskip("nnrt_npu_emu")

from conv_reference import conv_direct  # noqa: E402
from nnrt_core.backend import CompileOptions  # noqa: E402
from nnrt_core.frontends import load_onnx  # noqa: E402
from nnrt_core.registry import Registry  # noqa: E402
from nnrt_npu_emu.hostfuse import RELU_LO, STORE_BOUNDS, activation_bounds, plan_steps  # noqa: E402
from nnrt_npu_emu.numerics import FP16_MAX, round_fp16  # noqa: E402
from nnrt_npu_emu.ops import spatial  # noqa: E402
from nnrt_npu_emu.ops.spatial import conv_nd  # noqa: E402
from nnrt_npu_emu.program import Instr, Operand  # noqa: E402
from nnrt_numpy import parallel  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    return Registry().backends["npu_emu"].backend


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))).all())


def _chip_store(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.clip(x, -FP16_MAX, FP16_MAX).astype(np.float16).astype(np.float32)


# --------------------------------------------------- the clamp of a store
def _edge_values(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        special = np.array([0.0, -0.0, 1e-45, -1e-45, 2.0 ** -25, -(2.0 ** -25), 2.0 ** -26, -(2.0 ** -26), 1e-30,
                            -1e-30, np.nan, -np.nan, np.inf, -np.inf, 65504, -65504, 65519.99, 65520, -65520, 1e30,
                            -1e30, 1.0, -1.0, 2.5, -1.5, 2.5000002, -1.5000001], np.float32)
        rand = (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 6, n)).astype(np.float32)
        bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([special, rand, bits])


@pytest.mark.parametrize("act", [{"fn": "relu"}, {"fn": "clip", "min": -1.5, "max": 2.5},
                                 {"fn": "clip", "min": None, "max": 6.0}, {"fn": "clip", "min": 0.5, "max": None}])
def test_activation_in_the_store_clamp_is_the_activation_of_the_store(act):
    """round(clamp(y)) == act(round(y)) bit for bit, signed zeros and NaN included."""
    from nnrt_npu_emu.ops import KERNELS

    y = _edge_values(200_000, 1)
    want = np.empty_like(y)
    KERNELS["unary"]([_chip_store(y)], [want], act)  # the activation instruction on the rounded store
    lo, hi = activation_bounds(Instr("unary", "a", [], [], act))
    got = round_fp16(y.copy(), None, lo, hi)
    assert _same_bits(got, want)


def test_zero_bounds_and_inexact_activations_do_not_fuse():
    for act in ({"fn": "clip", "min": 0.0, "max": 6.0}, {"fn": "clip", "min": -6.0, "max": 0.0},
                {"fn": "clip", "min": 0.1, "max": 6.0}, {"fn": "clip", "min": 3.0, "max": 1.0},
                {"fn": "leakyrelu", "alpha": 0.1}, {"fn": "abs"}):
        assert activation_bounds(Instr("unary", "a", [], [], act)) is None, act
    assert activation_bounds(Instr("unary", "a", [], [], {"fn": "relu"})) == (RELU_LO, STORE_BOUNDS[1])


def test_plan_fuses_only_a_store_read_by_the_activation_alone():
    def ws(off, n=16):
        return Operand("ws", off, "float16", [n // 2])

    conv = Instr("conv", "c", [Operand("in", 0, "float32", [8]), None], [ws(0)], {})
    relu = Instr("unary", "r", [ws(0)], [ws(16)], {"fn": "relu"})
    other = Instr("nary", "o", [ws(0), ws(16)], [ws(32)], {"fn": "add"})

    class P:
        instrs = [conv, relu]
    assert [(s.index, s.count) for s in plan_steps(P)] == [(0, 2)]
    P.instrs = [conv, relu, other]  # the conv's store is read again: not fused
    assert [(s.index, s.count) for s in plan_steps(P)] == [(0, 1), (1, 1), (2, 1)]
    P.instrs = [conv, relu, Instr("cast", "w", [ws(48)], [ws(0)], {}), other]  # overwritten before the read
    assert [(s.index, s.count) for s in plan_steps(P)][0] == (0, 2)
    assert plan_steps(P)[0].via is None  # the conv writes the Relu's buffer
    conv_in_ws = Instr("conv", "c", [ws(16), None], [ws(0)], {})  # the Relu's buffer is the conv's input
    P.instrs = [conv_in_ws, relu]
    (st,) = plan_steps(P)
    assert (st.index, st.count, st.via) == (0, 2, conv_in_ws.outs[0])  # writes its own, the store reads it
    add_in_ws = Instr("nary", "a", [ws(16), ws(32)], [ws(0)], {"fn": "add"})  # one ufunc: overlap-safe
    P.instrs = [add_in_ws, relu]
    assert [(s.index, s.count, s.via) for s in plan_steps(P)] == [(0, 2, None)]
    P.instrs = [conv, Instr("unary", "r", [ws(0)], [ws(8)], {"fn": "relu"})]  # partly over the store: no
    assert [(s.index, s.count) for s in plan_steps(P)] == [(0, 1), (1, 1)]


# -------------------------------------------- whole programs, both paths
def _fusion_model() -> tuple:
    rs = np.random.RandomState(7)

    def w(name, *shape, s=0.5):
        return nh.from_array((rs.randn(*shape) * s).astype(np.float32), name)

    nodes = [
        h.make_node("Mul", ["x", "c"], ["m"]),
        h.make_node("Relu", ["m"], ["r"]),  # fused into the Mul's store
        h.make_node("Conv", ["r", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"]),  # fused into the conv's pieces
        h.make_node("Conv", ["r1", "wd", "bd"], ["d1"], pads=[1, 1, 1, 1], strides=[2, 1], group=8),  # depthwise
        h.make_node("Clip", ["d1", "lo", "hi"], ["k1"]),  # nonzero fp16 bounds: fused
        h.make_node("Conv", ["k1", "wg"], ["g1"], group=4),  # grouped pointwise
        h.make_node("Clip", ["g1", "zero", "six"], ["k2"]),  # Relu6: zero bound, not fused
        h.make_node("Add", ["k2", "k2"], ["s1"]),
        h.make_node("Relu", ["s1"], ["y"]),  # fused into the Add's store
        h.make_node("Relu", ["g1"], ["z"]),  # g1 is read twice: not fused
    ]
    inits = [nh.from_array(np.array([0.5, 1e-3, -3.0, 2.0], np.float32).reshape(1, 4, 1, 1), "c"),
             w("w1", 8, 4, 3, 3), w("b1", 8), w("wd", 8, 1, 3, 3), w("bd", 8), w("wg", 8, 2, 1, 1),
             nh.from_array(np.array(-1.5, np.float32), "lo"), nh.from_array(np.array(2.5, np.float32), "hi"),
             nh.from_array(np.array(0.0, np.float32), "zero"), nh.from_array(np.array(6.0, np.float32), "six")]
    g = h.make_graph(nodes, "fusion", [h.make_tensor_value_info("x", T.FLOAT, [2, 4, 9, 7])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 8, 5, 7]),
                      h.make_tensor_value_info("z", T.FLOAT, [2, 8, 5, 7])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_fused_program_matches_the_literal_executor(backend):
    part = backend.compile(load_onnx(_fusion_model()).graph, CompileOptions(precision="fp16", device="emu-npu-f16"))
    # Mul+Relu, Conv+Relu (its own buffer: the Relu's overlaps the Conv's input), Conv+Clip(-1.5, 2.5), Add+Relu
    assert part.bound.fused == 4
    assert sum(st.via is not None for st in plan_steps(part.program)) >= 1
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 9, 7)).astype(np.float32) * 4
    x.reshape(-1)[:27] = _edge_values(0, 0)  # signed zeros, tiny values, NaN, infinities, saturation
    for _ in range(2):
        fast = {k: backend.to_host(v) for k, v in part.run({"x": x}).items()}
        slow = part.run_reference({"x": x})
        for name in part.output_names:
            assert _same_bits(fast[name], slow[name]), name
    per_op = part.last_profile["per_op"]
    assert len(per_op) == len(part.program.instrs) and sum(r["host_us"] == 0 for r in per_op) == 4


# ------------------------------------------- convolution kernels, pieces
CASES = [  # (N, C, H, W), (M, C/g, kh, kw), strides, pads (t, l, b, r), dilations, group
    ((2, 6, 30, 24), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),  # depthwise, >= 512 pixels: batched product
    ((1, 8, 40, 33), (8, 1, 3, 3), (2, 2), (1, 0, 1, 2), (1, 1), 8),  # depthwise, strided, batched product
    ((1, 5, 27, 30), (5, 1, 3, 2), (1, 1), (2, 1, 0, 1), (2, 3), 5),  # depthwise, dilated, batched product
    ((2, 6, 9, 8), (6, 1, 3, 3), (2, 2), (0, 1, 1, 0), (2, 1), 6),  # depthwise, few pixels: einsum
    ((1, 4, 24, 24), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),  # depthwise, 2 filters per channel
    ((2, 12, 14, 11), (16, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4),  # grouped pointwise (batched groups)
    ((1, 8, 9, 9), (12, 2, 3, 3), (2, 1), (1, 0, 2, 1), (1, 2), 4),  # grouped 3x3, strided, dilated
    ((1, 4, 5, 5), (64, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),  # few pixels: ranges of channels
    ((1, 3, 17, 19), (5, 3, 3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 1),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_store_epilogue_rounds_each_piece_like_the_whole(case, threads, monkeypatch):
    """conv_nd with a bias and a store epilogue == round(conv + bias), bit for bit, in any cut."""
    monkeypatch.setattr(spatial, "PIECE_MACS", 2_000)  # many pieces
    monkeypatch.setattr(spatial, "COLS_CHUNK_BYTES", 2048)
    xs, ws, strides, pads, dil, group = case
    rs = np.random.RandomState(sum(xs) + sum(ws))
    x, w = (rs.randn(*xs) * 30).astype(np.float32), rs.randn(*ws).astype(np.float32)
    b = rs.randn(ws[0]).astype(np.float32)
    ref = conv_direct(x, w, strides, pads, dil, group) + b.reshape(1, -1, 1, 1)
    plain = conv_nd(x, w, strides, pads, dil, group, bias=b)
    np.testing.assert_allclose(plain, ref, rtol=1e-4, atol=1e-4)
    out = np.empty(ref.shape, np.float32)
    scratch = np.empty(out.shape, np.uint32)
    calls = []

    def post(sel=None):
        calls.append(sel)
        if sel is None:
            round_fp16(out, scratch, RELU_LO, STORE_BOUNDS[1])
        else:
            round_fp16(sel(out), sel(scratch), RELU_LO, STORE_BOUNDS[1])

    prev = parallel.set_threads(threads)
    try:
        assert conv_nd(x, w, strides, pads, dil, group, out=out, bias=b, post=post) is out
    finally:
        parallel.set_threads(*prev)
    assert calls
    assert _same_bits(out, np.maximum(_chip_store(plain), 0.0))
    with pytest.raises(ValueError, match="epilogue"):
        conv_nd(x, w, strides, pads, dil, group, bias=b, post=post)  # no output array to round


# ------------------------------------------------ int8: exact ranges of K
@pytest.mark.parametrize("K,x_max", [(600, 255), (4608, 255), (9000, 128), (40, 255)])
def test_k_chunks_keep_every_partial_sum_exact(K, x_max):
    """The chunked float32 GEMM of a ``split`` qconv equals the int64 product exactly."""
    from nnrt_npu_emu.ops.int8 import F32_EXACT, MAX_K_CHUNKS, _gemm, k_chunks

    rng = np.random.default_rng(K)
    w = rng.integers(-127, 128, (3, 24, K)).astype(np.float32)  # (G, Mg, K)
    x = rng.integers(0, x_max + 1, (2, 3, K, 37)).astype(np.float32)  # (N, G, K, P)
    w_abs = np.abs(w).reshape(-1, K)
    chunks = k_chunks(w_abs, x_max)
    want = np.matmul(w.astype(np.int64), x.astype(np.int64))
    if chunks is None:  # too many ranges: split weights
        assert (w_abs.sum(axis=1) * x_max).max() >= MAX_K_CHUNKS * F32_EXACT / 2
        return
    assert chunks[0] == 0 and chunks[-1] == K and all(a < b for a, b in zip(chunks, chunks[1:]))
    for k0, k1 in zip(chunks[:-1], chunks[1:]):
        assert (w_abs[:, k0:k1].sum(axis=1) * x_max).max() < F32_EXACT
    got = _gemm(w, x, "split", chunks)
    assert got.dtype == np.float64 and np.array_equal(got, want.astype(np.float64))
    assert np.array_equal(_gemm(w, x, "split"), got)  # the weight split gives the same integers
