"""Dynamic int8 on the NumPy backend: the graphs ``quantize_dynamic`` writes
(DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add) run with the
MatMulInteger, Cast and Mul as one fused step (nnrt_numpy/fusion_quant.py),
bit-exact with ONNX Runtime and with the unfused nodes, at edge values too."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from nnrt_core import ScheduleConfig, Session, load_model
import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_numpy.program import GraphProgram


def _float_model(w: np.ndarray, bias: np.ndarray, lead: tuple[int, ...], relu: bool) -> onnx.ModelProto:
    k, n = w.shape
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["y0"])]
    nodes.append(helper.make_node("Relu", ["y0"], ["y"]) if relu else helper.make_node("Identity", ["y0"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [*lead, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*lead, n])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _quantized(tmp: Path, m: onnx.ModelProto, weight_type: QuantType, per_channel: bool) -> onnx.ModelProto:
    onnx.save(m, tmp / "f.onnx")
    quantize_dynamic(tmp / "f.onnx", tmp / "q.onnx", weight_type=weight_type, per_channel=per_channel)
    return onnx.load(tmp / "q.onnx")


def _programs(m: onnx.ModelProto, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, GraphProgram]:
    graph = load_model(m).graph
    fused, plain = GraphProgram(graph), GraphProgram(graph, fuse=False)
    return fused.run([x])[0], plain.run([x])[0], fused


def _fused_ops(prog: GraphProgram) -> list[list[str]]:
    return [[n.op_type for n in st.chain.nodes] for st in prog.steps if st.chain is not None]


def _check(m: onnx.ModelProto, x: np.ndarray) -> GraphProgram:
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, unfused, prog = _programs(m, x)
    np.testing.assert_array_equal(got, unfused)
    np.testing.assert_array_equal(got, want)
    out = Session(m, ScheduleConfig(backends=["numpy"])).run({"x": x})
    np.testing.assert_array_equal(next(iter(out.values())), want)
    return prog


@pytest.mark.parametrize("weight_type", [QuantType.QInt8, QuantType.QUInt8])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("lead", [(5,), (2, 7)])
@pytest.mark.parametrize("k", [3, 64, 385])
def test_quantize_dynamic_matmul_is_fused_and_bit_exact(tmp_path, weight_type, per_channel, lead, k):
    rng = np.random.default_rng([k, len(lead), per_channel, weight_type == QuantType.QInt8])
    n = 33
    w = (rng.standard_normal((k, n)) * rng.uniform(0.1, 2.0, n)).astype(np.float32)
    m = _quantized(tmp_path, _float_model(w, rng.standard_normal(n).astype(np.float32), lead, True),
                   weight_type, per_channel)
    assert "MatMulInteger" in {nd.op_type for nd in m.graph.node}
    x = (rng.standard_normal((*lead, k)) * 3 + 0.5).astype(np.float32)
    prog = _check(m, x)
    assert ["MatMulInteger", "Cast", "Mul", "Add", "Relu"] in _fused_ops(prog)


@pytest.mark.parametrize("form", ["same_sign", "one_sided_input", "zeros", "single_value"])
def test_edge_values_are_bit_exact(tmp_path, form):
    # long K with the largest weights and inputs of one sign: the integer sums pass 2**24, so the
    # exact product is cut along K (float64 total) and must still convert to the same float32
    rng = np.random.default_rng(len(form))
    k, n = 3000, 8
    w = np.full((k, n), -1.0, np.float32)
    w[:, 1:] = rng.uniform(-1, 1, (k, n - 1))
    x = rng.uniform(-0.1, 1.0, (4, k)).astype(np.float32)
    x[0] = 1.0  # quantizes to 255 for the whole row
    if form == "one_sided_input":
        x = -np.abs(x)  # zero point 255: (q - zp) in [-255, 0]
    elif form == "zeros":
        x[:] = 0.0  # scale 0: all-zero quantization
    elif form == "single_value":
        x[:] = 0.75
    m = _quantized(tmp_path, _float_model(w, np.zeros(n, np.float32), (4,), False), QuantType.QInt8, False)
    prog = _check(m, x)
    assert ["MatMulInteger", "Cast", "Mul", "Add", "Identity"] in _fused_ops(prog) or \
        ["MatMulInteger", "Cast", "Mul", "Add"] in _fused_ops(prog)


def _int_graph(cast_to: int, extra_output: bool, const_b: bool) -> onnx.ModelProto:
    b = np.arange(-12, 12, dtype=np.int8).reshape(4, 6)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
             helper.make_node("MatMulInteger", ["q", "b", "z"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=cast_to),
             helper.make_node("Mul", ["s", "accf"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 6])]
    if extra_output:
        outs.append(helper.make_tensor_value_info("accf", TensorProto.FLOAT, [3, 6]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])]
    inits = [numpy_helper.from_array(b, "b")]
    if not const_b:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.INT8, [4, 6]))
    g = helper.make_graph(nodes, "g", inputs, outs, inits if const_b else [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_scale_first_operand_is_fused():
    m = _int_graph(TensorProto.FLOAT, extra_output=False, const_b=True)
    x = np.linspace(-2, 3, 12, dtype=np.float32).reshape(3, 4)
    got, unfused, prog = _programs(m, x)
    assert _fused_ops(prog) == [["MatMulInteger", "Cast", "Mul"]]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, unfused)


def test_not_fused_where_unsafe():
    x = np.linspace(-2, 3, 12, dtype=np.float32).reshape(3, 4)
    # the Cast's output is also a graph output: it must exist, so no fusion
    m = _int_graph(TensorProto.FLOAT, extra_output=True, const_b=True)
    graph = load_model(m).graph
    prog = GraphProgram(graph)
    assert _fused_ops(prog) == []
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for g, w in zip(prog.run([x]), want):
        np.testing.assert_array_equal(g, w)
    # weights not constant: the plain kernels
    m = _int_graph(TensorProto.FLOAT, extra_output=False, const_b=False)
    prog = GraphProgram(load_model(m).graph)
    assert _fused_ops(prog) == []
    b = np.arange(-12, 12, dtype=np.int8).reshape(4, 6)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "b": b})
    np.testing.assert_array_equal(prog.run([x, b])[0], want[0])


@pytest.mark.parametrize("form", ["normal", "ties", "positive", "negative", "constant", "zeros", "wide"])
def test_dynamic_quantize_linear_is_bit_exact(form):
    rng = np.random.default_rng(len(form))
    x = rng.standard_normal((7, 129)).astype(np.float32)
    if form == "ties":  # many x / scale exactly halfway between integers
        x = (np.arange(7 * 129, dtype=np.float32).reshape(7, 129) - 300) * np.float32(0.5)
    elif form == "positive":
        x = np.abs(x) + 1
    elif form == "negative":
        x = -np.abs(x) - 1
    elif form == "constant":
        x[:] = 2.5
    elif form == "zeros":
        x[:] = 0
    elif form == "wide":
        x *= np.float32(1e30)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, list(x.shape)),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = GraphProgram(load_model(m).graph).run([x])
    if form == "zeros":  # the ONNX rule's scale (max - min) / 255 = 0; ONNX Runtime writes 1 (y, zp: 0 both)
        assert float(got[1]) == 0.0 and float(want[1]) == 1.0
        got, want = [got[0], got[2]], [want[0], want[2]]
    for g_, w_ in zip(got, want):
        assert np.asarray(g_).dtype == w_.dtype
        np.testing.assert_array_equal(g_, w_)


# -- DynamicQuantizeLSTM with constant weights (converted once at compile to exact float32) ---------
LSTM_CONSTS = ("w", "r", "w_scale", "w_zp", "r_scale", "r_zp")


def _lstm_inputs(rng: np.random.Generator, t: int, i: int, hidden: int, d: int, w_type: type,
                 extreme: bool) -> list[tuple[str, np.ndarray | None]]:
    info = np.iinfo(w_type)
    w = rng.integers(info.min, info.max + 1, (d, i, 4 * hidden)).astype(w_type)
    zp = np.full(d, 0 if w_type == np.int8 else 128, w_type)
    x = (np.cumsum(rng.standard_normal((t, 2, i)), axis=0) / 3).astype(np.float32)
    if extreme:  # |w - zp| = 255 (uint8 255, zero point 0) on every row and large one-signed inputs:
        w[:, :, :8] = info.max  # partial sums pass 2**24 and the input product is cut along K
        zp[:] = 0
        x[:, 0] = np.abs(x[:, 0]) + 5.0
    return [("x", x), ("w", w), ("r", rng.integers(info.min, info.max + 1, (d, hidden, 4 * hidden)).astype(w_type)),
            ("b", (rng.standard_normal((d, 8 * hidden)) * 0.1).astype(np.float32)),
            ("lens", None), ("h0", None), ("c0", None), ("p", None),
            ("w_scale", np.full(d, 0.5 / i, np.float32)), ("w_zp", zp),
            ("r_scale", np.full(d, 2.0 / hidden, np.float32)), ("r_zp", zp.copy())]


@pytest.mark.parametrize("form", ["int8", "uint8_bidirectional", "extreme_long_input"])
def test_dynamic_quantize_lstm_with_constant_weights_is_bit_exact(form):
    from contrib_ort_cases import compare

    rng = np.random.default_rng(len(form))
    d = 2 if "bidirectional" in form else 1
    i = 600 if form.startswith("extreme") else 24
    inputs = _lstm_inputs(rng, 12, i, 40, d, np.int8 if form == "int8" else np.uint8, form.startswith("extreme"))
    attrs = {"hidden_size": 40, "direction": "bidirectional" if d == 2 else "forward"}
    assert compare("DynamicQuantizeLSTM", inputs, attrs, 3, initializers=LSTM_CONSTS, threads=1) == [0.0] * 3


def test_dynamic_quantize_lstm_converts_constant_weights_at_compile():
    from nnrt_numpy.kernel import NodeInfo
    from nnrt_numpy.ops.contrib.dynamic_quantize_lstm import DynamicQuantizeLSTM

    inputs = _lstm_inputs(np.random.default_rng(0), 3, 6, 5, 1, np.int8, False)
    consts = tuple(v if n in LSTM_CONSTS else None for n, v in inputs)
    info = NodeInfo("lstm", "DynamicQuantizeLSTM", "com.microsoft", 1, {"hidden_size": 5}, len(inputs), 3,
                    tuple(v is not None for _, v in inputs), tuple(None if v is None else v.dtype for _, v in inputs),
                    tuple(None if v is None else v.shape for _, v in inputs), consts, (None,) * 3, (None,) * 3, None)
    kernel = DynamicQuantizeLSTM(info)
    weights, _ = kernel._const["R"]
    np.testing.assert_array_equal(weights[0].f32, inputs[2][1][0].astype(np.float32))
    # a malformed constant is left to the run, which names it
    bad = list(consts)
    bad[10] = np.ones(3, np.float32)
    kernel = DynamicQuantizeLSTM(info.replace(const_inputs=tuple(bad)))
    assert "R" not in kernel._const
