"""The TFLite operators the real models of benchmarks/tflite_models.py need beyond
the frontend's core set, each on models written in code and compared with the
LiteRT interpreter (no downloads)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("tflite")
litert = pytest.importorskip("ai_edge_litert.interpreter")

from tflite_models import litert_run  # noqa: E402
from tflite_real_writer import RealWriter  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import ModelLoadError, UnsupportedNodeError  # noqa: E402

RNG = np.random.default_rng(0)


def run_nnrt(model: bytes, feeds: list[np.ndarray], backends=("numpy",)) -> list[np.ndarray]:
    sess = Session(model, ScheduleConfig(backends=list(backends)))
    res = sess.run({i.name: x for i, x in zip(sess.inputs, feeds)})
    return [np.asarray(res[o.name]) for o in sess.outputs]


def assert_matches_litert(model: bytes, feeds: list[np.ndarray], rel: float = 1e-5) -> list[np.ndarray]:
    want = litert_run(model, feeds)
    got = run_nnrt(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        scale = max(float(np.abs(w.astype(np.float64)).max()), 1e-6)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=0, atol=rel * scale)
    return got


# ------------------------------------------------- MediaPipe Convolution2DTransposeBias
def transpose_bias_model(x_shape, kernel, stride, padding, c_out, raw_options=None) -> bytes:
    """input NHWC -> Convolution2DTransposeBias (OHWI weights, bias) -> output."""
    n, h, w_, c = x_shape
    sh, sw = stride
    kh, kw = kernel
    if padding == "SAME":
        oh, ow = h * sh, w_ * sw
    else:
        oh, ow = (h - 1) * sh + kh, (w_ - 1) * sw + kw
    m = RealWriter()
    x = m.input("x", x_shape)
    wt = m.const("w", RNG.standard_normal((c_out, kh, kw, c)).astype(np.float32))
    b = m.const("b", RNG.standard_normal(c_out).astype(np.float32))
    y = m.tensor("y", (n, oh, ow, c_out))
    opts = raw_options if raw_options is not None else struct.pack("<3i", {"SAME": 1, "VALID": 2}[padding], sw, sh)
    m.op("CUSTOM", [x, wt, b], [y], custom="Convolution2DTransposeBias", custom_options=opts)
    m.outputs = [y]
    return m.build()


@pytest.mark.parametrize("x_shape,kernel,stride,padding,c_out", [
    ((1, 8, 8, 16), (2, 2), (2, 2), "SAME", 1),  # selfie_segmentation's last layer, scaled down
    ((1, 5, 7, 3), (3, 3), (2, 2), "SAME", 4),
    ((1, 6, 5, 2), (4, 3), (2, 1), "SAME", 3),
    ((1, 4, 4, 3), (3, 3), (1, 1), "VALID", 2),
    ((1, 5, 3, 2), (3, 2), (2, 3), "VALID", 5),
])
def test_convolution_2d_transpose_bias_matches_litert(x_shape, kernel, stride, padding, c_out):
    model = transpose_bias_model(x_shape, kernel, stride, padding, c_out)
    assert_matches_litert(model, [RNG.standard_normal(x_shape).astype(np.float32)])


def test_convolution_2d_transpose_bias_is_claimed_as_custom_op():
    from nnrt_core.frontends.tflite import custom_ops
    assert "Convolution2DTransposeBias" in custom_ops()


@pytest.mark.parametrize("raw,needle", [
    (b"\x01\x00\x00\x00", "12 bytes"),
    (struct.pack("<3i", 7, 2, 2), "padding 7"),
    (struct.pack("<3i", 1, 0, 2), "positive"),
])
def test_convolution_2d_transpose_bias_bad_options(raw, needle):
    model = transpose_bias_model((1, 4, 4, 2), (2, 2), (2, 2), "SAME", 1, raw_options=raw)
    with pytest.raises(UnsupportedNodeError, match=needle) as e:
        Session(model, ScheduleConfig(backends=["numpy"]))
    assert "Convolution2DTransposeBias" in str(e.value)


def test_convolution_2d_transpose_bias_output_shape_checked():
    m = RealWriter()
    x = m.input("x", (1, 4, 4, 2))
    wt = m.const("w", np.ones((1, 2, 2, 2), np.float32))
    b = m.const("b", np.zeros(1, np.float32))
    y = m.tensor("y", (1, 9, 8, 1))  # SAME, stride 2 makes 8 x 8
    m.op("CUSTOM", [x, wt, b], [y], custom="Convolution2DTransposeBias", custom_options=struct.pack("<3i", 1, 2, 2))
    m.outputs = [y]
    with pytest.raises((UnsupportedNodeError, ModelLoadError), match="expected 8"):
        Session(m.build(), ScheduleConfig(backends=["numpy"]))


# ------------------------------------------------- comparisons, logical ops, SELECT
def binary_model(op: str, shape_a, shape_b, dtype=np.float32, out_dtype=None, const_b=None, options=None,
                 **fields) -> bytes:
    m = RealWriter()
    a = m.input("a", shape_a, dtype)
    b = m.const("b", const_b) if const_b is not None else m.input("b", shape_b, dtype)
    out_shape = np.broadcast_shapes(tuple(shape_a), tuple(shape_b))
    y = m.tensor("y", out_shape, out_dtype or dtype)
    m.op(op, [a, b], [y], options, **fields)
    m.outputs = [y]
    return m.build()


@pytest.mark.parametrize("op", ["GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL", "EQUAL", "NOT_EQUAL"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((1, 4, 5, 3), (3,)), ((2, 1), (1, 5))])
def test_comparisons_match_litert(op, shapes):
    a = RNG.integers(-3, 4, shapes[0]).astype(np.float32)  # integers: ties exercise the *_EQUAL cases
    b = RNG.integers(-3, 4, shapes[1]).astype(np.float32)
    assert_matches_litert(binary_model(op, *shapes, out_dtype=np.bool_), [a, b])


def test_comparison_with_int32_and_constant():
    b = np.array([0, 2, -1], np.int32)
    model = binary_model("GREATER", (4, 3), (3,), np.int32, np.bool_, const_b=b)
    assert_matches_litert(model, [RNG.integers(-3, 4, (4, 3)).astype(np.int32)])


@pytest.mark.parametrize("op", ["LOGICAL_AND", "LOGICAL_OR"])
def test_logical_match_litert(op):
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((1, 4)) > 0.5
    assert_matches_litert(binary_model(op, (3, 4), (1, 4), np.bool_), [a, b])


def test_logical_not_matches_litert():
    m = RealWriter()
    a = m.input("a", (2, 5), np.bool_)
    y = m.tensor("y", (2, 5), np.bool_)
    m.op("LOGICAL_NOT", [a], [y])
    m.outputs = [y]
    assert_matches_litert(m.build(), [RNG.random((2, 5)) > 0.5])


def select_model(op: str, c_shape, x_shape, y_shape) -> bytes:
    m = RealWriter()
    c = m.input("c", c_shape, np.bool_)
    x = m.input("x", x_shape)
    y = m.input("y", y_shape)
    out = m.tensor("out", np.broadcast_shapes(tuple(c_shape), tuple(x_shape), tuple(y_shape))
                   if op == "SELECT_V2" else x_shape)
    m.op(op, [c, x, y], [out])
    m.outputs = [out]
    return m.build()


@pytest.mark.parametrize("op,shapes", [
    ("SELECT_V2", ((2, 3), (2, 3), (2, 3))),
    ("SELECT_V2", ((1, 3), (2, 1), (2, 3))),  # broadcasting, as BirdNET's meta model uses it
    ("SELECT_V2", ((1, 4, 4, 1), (1, 4, 4, 2), ())),
    ("SELECT", ((2, 3), (2, 3), (2, 3))),
    ("SELECT", ((3,), (3, 2, 2), (3, 2, 2))),  # rank-1 condition picks rows
])
def test_select_matches_litert(op, shapes):
    c = RNG.random(shapes[0]) > 0.5
    x, y = (RNG.standard_normal(s).astype(np.float32) for s in shapes[1:])
    assert_matches_litert(select_model(op, *shapes), [c, x, y])


def test_select_condition_must_be_bool():
    m = RealWriter()
    c = m.input("c", (2,), np.float32)
    x = m.input("x", (2,))
    out = m.tensor("out", (2,))
    m.op("SELECT_V2", [c, x, x], [out])
    m.outputs = [out]
    with pytest.raises(UnsupportedNodeError, match="condition must be BOOL"):
        Session(m.build(), ScheduleConfig(backends=["numpy"]))


# ------------------------------------------------- element-wise math
def unary_model(op: str, shape, dtype=np.float32) -> bytes:
    m = RealWriter()
    a = m.input("a", shape, dtype)
    y = m.tensor("y", shape, dtype)
    m.op(op, [a], [y])
    m.outputs = [y]
    return m.build()


@pytest.mark.parametrize("op", ["SIN", "COS", "FLOOR", "CEIL", "ROUND", "SIGN", "SQUARE"])
def test_unary_math_matches_litert(op):
    x = (RNG.standard_normal((2, 6, 5, 3)) * 4).astype(np.float32)
    x.flat[:4] = [0.5, -0.5, 1.5, -2.5]  # ROUND: ties go to even
    x.flat[4] = 0.0
    assert_matches_litert(unary_model(op, x.shape), [x])


def test_pow_matches_litert():
    a = RNG.uniform(0.1, 3, (3, 4)).astype(np.float32)
    b = RNG.uniform(-2, 2, (3, 4)).astype(np.float32)
    assert_matches_litert(binary_model("POW", (3, 4), (3, 4)), [a, b])


@pytest.mark.parametrize("op", ["FLOOR_DIV", "FLOOR_MOD"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_floor_div_mod_match_litert(op, dtype):
    a = RNG.integers(-20, 21, (4, 6)).astype(dtype)
    b = RNG.choice(np.array([-7, -3, -2, -1, 1, 2, 3, 5], dtype), (4, 6))
    if dtype == np.float32:
        a = a + RNG.uniform(0, 1, a.shape).astype(np.float32)
    assert_matches_litert(binary_model(op, (4, 6), (4, 6), dtype), [a, b])


# ------------------------------------------------- IF with branch subgraphs
def if_model(else_kind: str) -> bytes:
    """main: c = x[0,0] > 0 (as [1] BOOL); y = IF(c, x, W): then FC(x, W) -> LOGISTIC, else (``else_kind``)
    "pass" (the operand itself, like openWakeWord's hey_jarvis) or "mul" (x * x)."""
    w = RNG.standard_normal((4, 4)).astype(np.float32)
    m = RealWriter()
    x = m.input("x", (1, 4))
    wt = m.const("W", w)
    zero = m.const("zero", np.zeros((1, 1), np.float32))
    first = m.tensor("first", (1, 1))
    m.op("SLICE", [x, m.const("begin", np.array([0, 0], np.int32)), m.const("size", np.array([1, 1], np.int32))],
         [first])
    c2 = m.tensor("c2", (1, 1), np.bool_)
    m.op("GREATER", [first, zero], [c2])
    c = m.tensor("c", (1,), np.bool_)
    m.op("RESHAPE", [c2, m.const("one", np.array([1], np.int32))], [c])
    y = m.tensor("y", (1, 4))
    m.op("IF", [c, x, wt], [y], "IfOptions", ThenSubgraphIndex=1, ElseSubgraphIndex=2)
    m.outputs = [y]
    m.subgraph("then")
    a, b = m.input("a", (1, 4)), m.input("b", (4, 4))
    h, s = m.tensor("h", (1, 4)), m.tensor("s", (1, 4))
    m.op("FULLY_CONNECTED", [a, b, -1], [h], "FullyConnectedOptions")
    m.op("LOGISTIC", [h], [s])
    m.outputs = [s]
    m.subgraph("else")
    a, b = m.input("a", (1, 4)), m.input("b", (4, 4))
    if else_kind == "pass":
        m.outputs = [a]
    else:
        sq = m.tensor("sq", (1, 4))
        m.op("MUL", [a, a], [sq], "MulOptions")
        m.outputs = [sq]
    return m.build()


@pytest.mark.parametrize("else_kind", ["pass", "mul"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_runs_the_chosen_branch_like_litert(else_kind, sign):
    model = if_model(else_kind)
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    x[0, 0] = sign * abs(x[0, 0]) + sign * 0.1
    got = assert_matches_litert(model, [x])
    if sign < 0:  # else branch
        np.testing.assert_allclose(got[0], x if else_kind == "pass" else x * x, rtol=1e-6)


def test_if_branch_index_checked():
    m = RealWriter()
    c = m.input("c", (1,), np.bool_)
    x = m.input("x", (1, 2))
    y = m.tensor("y", (1, 2))
    m.op("IF", [c, x], [y], "IfOptions", ThenSubgraphIndex=0, ElseSubgraphIndex=5)  # 0: itself
    m.outputs = [y]
    with pytest.raises(UnsupportedNodeError, match="branch subgraph 0"):
        Session(m.build(), ScheduleConfig(backends=["numpy"]))


def test_if_operand_count_checked():
    m = RealWriter()
    c = m.input("c", (1,), np.bool_)
    x = m.input("x", (1, 2))
    y = m.tensor("y", (1, 2))
    m.op("IF", [c, x], [y], "IfOptions", ThenSubgraphIndex=1, ElseSubgraphIndex=1)
    m.outputs = [y]
    m.subgraph("branch")
    a, b = m.input("a", (1, 2)), m.input("b", (1, 2))
    m.outputs = [a]
    with pytest.raises(UnsupportedNodeError, match="takes 2 inputs, the operator passes 1"):
        Session(m.build(), ScheduleConfig(backends=["numpy"]))


# ------------------------------------------------- resource variables as explicit state
RESOURCE = 13  # tflite.TensorType.RESOURCE


def handle(m: RealWriter, name: str) -> int:
    t = m.tensor(name + "_handle", ())
    m.tensors[t]["type"] = RESOURCE
    m.op("VAR_HANDLE", [], [t], "VarHandleOptions", SharedName=name)
    return t


def accumulator_model(init: np.ndarray, twice: bool = False) -> bytes:
    """acc = acc + x (acc kept in a variable initialised by CALL_ONCE); output acc * 2.
    ``twice``: a second read-add-assign in the same step (reads see the first assignment)."""
    m = RealWriter()
    x = m.input("x", init.shape)
    m.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=1)
    h = handle(m, "acc")
    cur = m.tensor("cur", init.shape)
    m.op("READ_VARIABLE", [h], [cur])
    new = m.tensor("new", init.shape)
    m.op("ADD", [cur, x], [new], "AddOptions")
    m.op("ASSIGN_VARIABLE", [h, new], [])
    if twice:
        again, newer = m.tensor("again", init.shape), m.tensor("newer", init.shape)
        m.op("READ_VARIABLE", [h], [again])
        m.op("ADD", [again, x], [newer], "AddOptions")
        m.op("ASSIGN_VARIABLE", [h, newer], [])
        new = newer
    y = m.tensor("y", init.shape)
    m.op("MUL", [new, m.const("two", np.full(init.shape, 2, np.float32))], [y], "MulOptions")
    m.outputs = [y]
    m.subgraph("init")
    h = handle(m, "acc")
    m.op("ASSIGN_VARIABLE", [h, m.const("init", init)], [])
    return m.build()


def litert_steps(model: bytes, steps: list[np.ndarray]) -> list[np.ndarray]:
    it = litert.Interpreter(model_content=model)
    it.allocate_tensors()
    out = []
    for x in steps:
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        out.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return out


@pytest.mark.parametrize("twice", [False, True])
def test_variables_become_carried_state_matching_litert(twice):
    import json

    from nnrt_core.frontends.tflite import load_tflite

    init = RNG.standard_normal((1, 3)).astype(np.float32)
    model = accumulator_model(init, twice)
    steps = [RNG.standard_normal((1, 3)).astype(np.float32) for _ in range(4)]
    want = litert_steps(model, steps)
    (var,) = json.loads(load_tflite(model).metadata["tflite.variables"])
    assert (var["name"], var["input"], var["output"]) == ("acc", "acc__state_in", "acc__state_out")
    state = np.array(var["initial"], np.float32).reshape(var["shape"])
    np.testing.assert_array_equal(state, init)
    sess = Session(model, ScheduleConfig(backends=["numpy"]))
    assert [i.name for i in sess.inputs] == ["x", "acc__state_in"]
    for x, w in zip(steps, want):
        res = sess.run({"x": x, "acc__state_in": state})
        state = res["acc__state_out"]
        np.testing.assert_allclose(res["y"], w, rtol=1e-6, atol=1e-6)


def test_read_variable_needs_a_handle():
    m = RealWriter()
    x = m.input("x", (1, 2))
    y = m.tensor("y", (1, 2))
    m.op("READ_VARIABLE", [x], [y])
    m.outputs = [y]
    with pytest.raises(UnsupportedNodeError, match="VAR_HANDLE"):
        Session(m.build(), ScheduleConfig(backends=["numpy"]))


def test_call_once_init_must_assign_constants():
    m = RealWriter()
    x = m.input("x", (1, 2))
    m.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=1)
    y = m.tensor("y", (1, 2))
    m.op("RELU", [x], [y])
    m.outputs = [y]
    m.subgraph("init")
    a = m.input("a", (1, 2))
    b = m.tensor("b", (1, 2))
    m.op("RELU", [a], [b])
    with pytest.raises(UnsupportedNodeError, match="init subgraph 1 operator 0 \\(RELU\\)"):
        Session(m.build(), ScheduleConfig(backends=["numpy"]))
