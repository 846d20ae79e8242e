"""Tests of the Python graph builder (``nnrt_core.builder``) and of
``available_operations``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from nnrt_core import (
    BuilderError,
    ConfigError,
    GraphBuilder,
    NnrtError,
    OperationSupport,
    ScheduleConfig,
    Session,
    available_operations,
)
from nnrt_core.builder import UnknownOperatorError, device_ids, known_operators
from nnrt_core.frontends import to_onnx
from nnrt_core.ir import DataType, Model, TensorType
from nnrt_core.registry import Registry

from conftest import make_registry

ROOT = Path(__file__).resolve().parents[1]
NUMPY_ONLY = ScheduleConfig(backends=["numpy"])


# ------------------------------------------------------------------ helpers
def _cnn(seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    b = GraphBuilder("cnn")
    x = b.input("x", "float32", [1, 3, 16, 16])
    h = x
    for c_in, c_out in ((3, 4), (4, 8)):
        w = rng.standard_normal((c_out, c_in, 3, 3)).astype(np.float32) * np.float32(0.3)
        h = b.conv(h, w, rng.standard_normal(c_out).astype(np.float32), pads=[1, 1, 1, 1])
        h = b.batch_norm(h, np.ones(c_out, np.float32), np.zeros(c_out, np.float32),
                         rng.standard_normal(c_out).astype(np.float32) * np.float32(0.1),
                         rng.uniform(0.5, 1.5, c_out).astype(np.float32))
        h = b.relu(h)
        h = b.max_pool(h, [2, 2], strides=[2, 2])
    h = b.flatten(h)
    assert h.shape == (1, 8 * 4 * 4)
    logits = b.gemm(h, rng.standard_normal((128, 10)).astype(np.float32) * np.float32(0.1),
                    np.zeros(10, np.float32))
    b.output(b.softmax(logits), "probs")
    return b.build()


def _mlp(seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    b = GraphBuilder("mlp")
    x = b.input("x", np.float32, ["N", 4])
    w1 = b.constant(rng.standard_normal((4, 16)).astype(np.float32), "w1")
    h = b.relu(x @ w1 + rng.standard_normal(16).astype(np.float32))
    h = b.tanh(b.matmul(h, rng.standard_normal((16, 3)).astype(np.float32))) * 2.0 - 1.0
    b.output(b.softmax(h, axis=-1), "probs")
    b.output(b.reduce_mean(h, [1], keepdims=False), "mean")
    return b.build()


def _onnxruntime_run(model: Model, feeds: dict) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    proto = to_onnx(model, ir_version=model.ir_version)
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _builder() -> tuple[GraphBuilder, object, object]:
    b = GraphBuilder("t")
    return b, b.input("img", "float32", ["N", 3, 8, 8]), b.input("m", "float32", [2, 3])


def _fails(call, *fragments: str, error: type = BuilderError) -> str:
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for f in fragments:
        assert f in message, message
    return message


# ------------------------------------------------------ models that run
def test_cnn_runs_in_session_and_matches_onnxruntime():
    model = _cnn()
    model.graph.validate()
    assert [n.op_type for n in model.graph.nodes][:4] == ["Conv", "BatchNormalization", "Relu", "MaxPool"]
    x = np.random.default_rng(1).random((1, 3, 16, 16), dtype=np.float32)
    sess = Session(model, NUMPY_ONLY, registry=make_registry())
    out = sess.run({"x": x})
    assert list(out) == ["probs"] and out["probs"].shape == (1, 10)
    np.testing.assert_allclose(out["probs"].sum(), 1.0, rtol=1e-5)
    (expected,) = _onnxruntime_run(model, {"x": x})
    np.testing.assert_allclose(out["probs"], expected, rtol=1e-5, atol=1e-6)


def test_mlp_with_symbolic_batch_matches_onnxruntime():
    model = _mlp()
    assert model.graph.inputs[0].type == TensorType(DataType.FLOAT, ("N", 4))
    assert model.graph.outputs[0].shape == ("N", 3)
    sess = Session(model, NUMPY_ONLY, registry=make_registry())
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        out = sess.run({"x": x})
        probs, mean = _onnxruntime_run(model, {"x": x})
        np.testing.assert_allclose(out["probs"], probs, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["mean"], mean, rtol=1e-5, atol=1e-6)
        assert out["mean"].shape == (batch,)


def test_build_returns_a_copy_and_the_builder_keeps_growing():
    b = GraphBuilder("g")
    x = b.input("x", "float32", [2])
    b.output(b.relu(x), "y")
    first = b.build()
    b.output(b.sigmoid(x), "z")
    assert [v.name for v in first.graph.outputs] == ["y"]
    assert [v.name for v in b.build().graph.outputs] == ["y", "z"]
    assert first.producer_name == "nnrt.builder" and first.opset_imports == {"": b.opset}


def test_generic_op_attribute_helpers_and_multiple_outputs():
    b = GraphBuilder("g")
    x = b.input("x", "float32", [2, 5])
    leaky = b.LeakyRelu(x, alpha=0.2)
    values, indices = b.op("TopK", [leaky, np.array([3], np.int64)], {"axis": 1})
    assert values.type == TensorType(DataType.FLOAT, (2, 3))
    assert indices.dtype == DataType.INT64
    left, right = b.split(x, [2, 3], axis=1)
    assert (left.shape, right.shape) == ((2, 2), (2, 3))
    b.output(values, "values")
    b.output(indices, "indices")
    b.output(b.concat([right, left], axis=1), "swapped")
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)}
    out = Session(b.build(), NUMPY_ONLY, registry=make_registry()).run(feeds)
    leaky_ref = np.where(feeds["x"] > 0, feeds["x"], 0.2 * feeds["x"])
    np.testing.assert_allclose(out["values"], -np.sort(-leaky_ref, axis=1)[:, :3], rtol=1e-6)
    np.testing.assert_array_equal(out["swapped"], np.concatenate([feeds["x"][:, 2:], feeds["x"][:, :2]], 1))


def test_shape_helpers_and_scalars_follow_the_operand_dtype():
    b = GraphBuilder("g")
    x = b.input("x", "float16", [2, 3])
    y = (x * 2.0 + 1) / 4
    assert y.dtype == DataType.FLOAT16
    r = b.reshape(b.transpose(y), [1, -1])
    assert r.shape == (1, 6)
    s = b.squeeze(b.unsqueeze(b.slice(y, [0], [1]), [0]), [0])
    assert s.shape == (1, 3)
    c = b.clip(b.cast(x, "float32"), 0.0, 1.5)
    assert c.dtype == DataType.FLOAT
    b.output(r, "r")
    b.output(c, "c")
    b.output(b.pad(s, [0, 1, 0, 1], value=-1.0), "p")
    x_val = np.arange(6, dtype=np.float16).reshape(2, 3)
    out = Session(b.build(), NUMPY_ONLY, registry=make_registry()).run({"x": x_val})
    ref = (x_val * np.float16(2) + np.float16(1)) / np.float16(4)
    np.testing.assert_allclose(out["r"], ref.T.reshape(1, -1))
    np.testing.assert_allclose(out["c"], np.clip(x_val.astype(np.float32), 0, 1.5))
    np.testing.assert_allclose(out["p"], np.pad(ref[:1], ((0, 0), (1, 1)), constant_values=-1))


def test_control_flow_with_built_subgraphs():
    def branch(k: float) -> Model:
        g = GraphBuilder(f"branch{k}")
        g.output(g.constant(np.full(2, k, np.float32)))
        return g.build()

    b = GraphBuilder("ctrl")
    cond = b.input("cond", "bool", [])
    x = b.input("x", "float32", [2])
    chosen = b.op("If", [cond], {"then_branch": branch(1.0), "else_branch": branch(2.0)})
    assert chosen.type == TensorType(DataType.FLOAT, (2,))
    b.output(x + chosen, "y")
    model = b.build()
    sess = Session(model, NUMPY_ONLY, registry=make_registry())
    for flag, want in ((True, 2.0), (False, 3.0)):
        feeds = {"cond": np.array(flag), "x": np.ones(2, np.float32)}
        np.testing.assert_array_equal(sess.run(feeds)["y"], [want, want])
        np.testing.assert_array_equal(_onnxruntime_run(model, feeds)[0], [want, want])


def test_contrib_domain_operator():
    if "FusedConv" not in known_operators("com.microsoft"):
        pytest.skip("onnxruntime's contrib schemas are not available")
    b = GraphBuilder("contrib")
    x = b.input("x", "float32", [1, 2, 4, 4])
    w = np.random.default_rng(0).standard_normal((3, 2, 1, 1)).astype(np.float32)
    y = b.op("FusedConv", [x, w], {"activation": "Relu"}, domain="com.microsoft")
    assert y.dtype == DataType.FLOAT
    b.output(y, "y")
    model = b.build()
    assert model.opset_imports["com.microsoft"] >= 1
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32)}
    out = Session(model, NUMPY_ONLY, registry=make_registry()).run(feeds)["y"]
    np.testing.assert_allclose(out, np.maximum(np.einsum("oi,nihw->nohw", w[:, :, 0, 0], feeds["x"]), 0),
                               rtol=1e-5, atol=1e-6)
    _fails(lambda: b.op("FusedConv", [x, w], {"activaton": "Relu"}, domain="com.microsoft"),
           "unknown attribute 'activaton'", "activation")


def test_every_numpy_kernel_has_a_schema_the_builder_validates_against():
    kernel = pytest.importorskip("nnrt_numpy.kernel")
    from nnrt_core.builder.schema import find_schema, newest_opset
    from nnrt_core.frontends.onnx import onnxruntime_schemas

    for domain, op in sorted({(d, o) for d, o, _ in kernel.REGISTRY.ops()}):
        if domain and not onnxruntime_schemas():
            continue
        assert find_schema(op, domain, newest_opset(domain)).name == op


# --------------------------------------------------------------- outputs
def test_output_naming_rules():
    b = GraphBuilder("g")
    x = b.input("x", "float32", [2])
    y = b.relu(x)
    assert b.output(y, "act").name == "act" and y.name == "act"  # a node output is renamed
    again = b.output(y, "act_copy")  # already an output: an Identity carries the new name
    assert again.name == "act_copy" and b.nodes[-1].op_type == "Identity"
    passthrough = b.output(x)
    assert passthrough.name == "x"
    const = b.output(b.constant([1.0, 2.0], "k"), "k_out")
    assert const.dtype == DataType.FLOAT  # Python floats default to float32
    out = Session(b.build(), NUMPY_ONLY, registry=make_registry()).run({"x": np.array([-1, 2], np.float32)})
    assert list(out) == ["act", "act_copy", "x", "k_out"]
    np.testing.assert_array_equal(out["k_out"], [1.0, 2.0])
    _fails(lambda: b.output(y), "'act' is already a graph output")
    _fails(lambda: b.output(x, "act"), "'act' is already used")


# ----------------------------------------------------------------- errors
def test_wrong_arity_names_the_op_and_node():
    b, img, m = _builder()
    _fails(lambda: b.op("Relu", [m, m]), "Relu (node 'relu_0')", "takes 1 input(s), got 2")
    _fails(lambda: b.op("Add", [m]), "Add", "takes 2 input(s), got 1")
    _fails(lambda: b.op("Conv", [img, None, np.ones(4, np.float32)]), "input 1 (W) is required")
    _fails(lambda: b.op("Conv", [img, None]), "takes 2 to 3 input(s), got 1")  # trailing None = omitted
    _fails(lambda: b.op("Relu", [m], num_outputs=2), "has 1 output(s), asked for 2")


def test_attribute_errors():
    b, img, m = _builder()
    _fails(lambda: b.leaky_relu(m, alpha="big"), "LeakyRelu", "attribute 'alpha' expects a float, got str")
    _fails(lambda: b.max_pool(img, [2, 2], strides=2), "MaxPool", "'strides' expects a list of ints, got int")
    _fails(lambda: b.op("Transpose", [m], {"perm": [1.5, 0]}), "'perm' expects a list of ints")
    _fails(lambda: b.op("Relu", [m], {"alpha": 1.0}), "unknown attribute 'alpha'", "accepts: none")
    _fails(lambda: b.op("Softmax", [m], {"axes": 1}), "unknown attribute 'axes'", "accepts: axis")
    _fails(lambda: b.op("Cast", [m]), "Cast", "missing required attribute(s) to")
    _fails(lambda: b.op("Softmax", [m], ["axis", 1]), "Softmax", "attrs a mapping")
    _fails(lambda: b.op("Relu", "m"), "Relu", "inputs must be a list")
    _fails(lambda: b.conv(img, np.ones((4, 3, 3, 3), np.float32), pads=[1, 1]), "Conv", "pads")


@pytest.mark.parametrize("make, fragments", [
    (lambda b, img, m: b.add(m, np.ones(4, np.float32)), ["Add (node 'add_0')", "Incompatible dimensions",
                                                          "'m' float[2,3]"]),
    (lambda b, img, m: b.matmul(m, np.ones((4, 2), np.float32)), ["MatMul", "matrix multiplication"]),
    (lambda b, img, m: b.conv(img, np.ones((4, 2, 3, 3), np.float32)), ["Conv", "'img' has 3 channels",
                                                                        "group (1) = 2"]),
    (lambda b, img, m: b.conv(img, np.ones((4, 3, 3, 3), np.float32), np.ones(5, np.float32)),
     ["B", "4 elements"]),
    (lambda b, img, m: b.conv(img, np.ones((4, 3, 3), np.float32)), ["same rank"]),
    (lambda b, img, m: b.reshape(m, [4, -1]), ["Reshape", "incompatible shapes"]),
    (lambda b, img, m: b.concat([m, np.ones((2, 2), np.float32)], axis=0), ["Concat"]),
    (lambda b, img, m: b.add(m, np.int64(1)), ["input 1 (B)", "tensor(int64) but input 0 has tensor(float)"]),
    (lambda b, img, m: b.op("Relu", [b.cast(m, "uint8")]), ["Relu", "allowed: ", "tensor(float)"]),
])
def test_incompatible_inputs_fail_at_the_call(make, fragments):
    b, img, m = _builder()
    nodes, consts = len(b.nodes), len(b._graph.initializers)  # noqa: SLF001
    with pytest.raises(BuilderError) as info:
        make(b, img, m)
    for f in fragments:
        assert f in str(info.value), str(info.value)
    created = [n for n in b.nodes if n.op_type == "Cast"]
    assert len(b.nodes) == nodes + len(created)  # the failing node was not added
    assert len(b._graph.initializers) == consts  # nor its constants  # noqa: SLF001


def test_unknown_operators_suggest_names():
    b, img, m = _builder()
    msg = _fails(lambda: b.op("Conv2d", [img]), "unknown operator 'Conv2d'", "did you mean Conv")
    assert "ai.onnx" in msg
    _fails(lambda: b.op("relu", [m]), "did you mean Relu,")
    _fails(lambda: b.Relu6(m), "unknown operator 'Relu6'", "Relu", error=UnknownOperatorError)
    assert not hasattr(b, "Relu6") and hasattr(b, "Relu")
    with pytest.raises(AttributeError):
        b.not_a_helper  # noqa: B018
    _fails(lambda: b.op("Gelu", [m], domain="ai.onnx.ml"), "unknown operator 'Gelu' in domain 'ai.onnx.ml'")
    old = GraphBuilder("old", opset=13)
    _fails(lambda: old.gelu(old.input("x", "float32", [1])), "'Gelu' exists from opset 20", "opset 13")


def test_values_and_names_are_checked():
    b, img, m = _builder()
    other = GraphBuilder("other")
    foreign = other.input("y", "float32", [2, 3])
    _fails(lambda: b.output(foreign), "value 'y' belongs to builder 'other', not to 't'")
    _fails(lambda: b.add(m, foreign), "Add", "input 1", "belongs to builder 'other'")
    _fails(lambda: b.output(m.value), "got the IR value 'm'")
    _fails(lambda: b.input("m", "float32", [1]), "name 'm' is already used")
    _fails(lambda: b.relu(m, name="img"), "name 'img' is already used")
    _fails(lambda: b.input("z", "floaty", [1]), "unknown element type 'floaty'")
    _fails(lambda: b.input("z", "float32", [1.5]), "dimension 0")
    _fails(lambda: b.input("z", "float32", "N"), "shape must be a list")
    _fails(lambda: b.constant([[1, 2], [3]]), "constant", "cannot turn list into an array")
    _fails(lambda: b.constant({"a": 1}, "table"), "constant 'table'")
    _fails(lambda: b.build(), "has no outputs")
    _fails(lambda: GraphBuilder("g", opset=999), "opset must be an int")
    with pytest.raises(BuilderError):
        bool(m)
    assert issubclass(BuilderError, NnrtError)


# ------------------------------------------------------ available_operations
@pytest.fixture(scope="module")
def full_registry() -> Registry:
    pytest.importorskip("nnrt_npu_emu")
    reg = Registry()
    assert reg.backends["npu_emu"].available, reg.backends["npu_emu"].reason
    return reg


def _with_unsupported_op() -> Model:
    b = GraphBuilder("mixed")
    x = b.input("x", "float32", [1, 4, 8, 8])
    y = b.LRN(b.relu(x), size=3)  # LRN is not in the emulated NPU's op set
    b.output(b.Sin(y), "y")
    return b.build()


def test_available_operations_on_numpy_and_npu(full_registry):
    model = _with_unsupported_op()
    on_numpy = available_operations(model, "numpy", registry=full_registry)
    assert [a.node for a in on_numpy] == [n.name for n in model.graph.nodes]
    assert all(isinstance(a, OperationSupport) and a.supported and a.reason is None for a in on_numpy)

    fp16 = ScheduleConfig(precision="fp16")  # the chip's precision: under the default fp32 it declines floats
    in_fp32 = {a.op_type: a for a in available_operations(model, "npu_emu", registry=full_registry)}
    assert not in_fp32["Relu"].supported and "precision 'fp32' was asked" in in_fp32["Relu"].reason
    on_npu = {a.op_type: a for a in available_operations(model, "npu_emu", config=fp16, registry=full_registry)}
    assert on_npu["Relu"].supported
    assert not on_npu["LRN"].supported and "not in the NPU op set" in on_npu["LRN"].reason
    assert not on_npu["Sin"].supported
    assert on_npu["LRN"].to_dict()["node"] == "lrn_0"

    int8_chip = available_operations(model, "npu_emu:npu:1", config=fp16, registry=full_registry)
    assert not any(a.supported for a in int8_chip)
    assert "int8" in int8_chip[0].reason
    by_name = available_operations(model, "npu_emu:emu-npu-f16", config=fp16, registry=full_registry)
    assert [a.supported for a in by_name] == [a.supported for a in on_npu.values()]


def test_available_operations_accepts_onnx_models(full_registry, tmp_path):
    model = _cnn()
    path = tmp_path / "cnn.onnx"
    onnx.save(to_onnx(model, ir_version=model.ir_version), path)
    answers = available_operations(str(path), "npu_emu:npu:0", config=ScheduleConfig(precision="fp16"),
                                   registry=full_registry)
    assert len(answers) == len(model.graph.nodes) and all(a.supported for a in answers)


def test_available_operations_unknown_devices(full_registry):
    model = _mlp()
    msg = _fails(lambda: available_operations(model, "gpu", registry=full_registry),
                 "unknown device 'gpu'", "numpy", "npu_emu:npu:1", error=ConfigError)
    assert "npu_emu:npu:0" in msg
    _fails(lambda: available_operations(model, "npu_emu:npu:7", registry=full_registry),
           "no device 'npu:7'", "npu_emu:npu:0", error=ConfigError)
    _fails(lambda: available_operations(model, "", registry=full_registry), "device must be", error=ConfigError)
    assert "numpy:cpu:0" in device_ids(full_registry)


# ----------------------------------------------------------------- example
def test_build_cnn_example_runs_and_exports(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("nnrt_npu_emu")
    out = tmp_path / "cnn.onnx"
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "build_cnn.py"), str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "lrn_0 (LRN): op LRN is not in the NPU op set" in proc.stdout
    assert "onnxruntime" in proc.stdout and "npu_emu" in proc.stdout
    onnx.checker.check_model(onnx.load(out), full_check=True)
