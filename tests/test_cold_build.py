"""The fresh-process build shortcuts (docs/runtime.md, "Build stages"): the
ONNX checker and shape inference read the file's own bytes while the parsed
proto still says the same, and the same checks refuse the same bad models."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx
from nnrt_core.frontends.onnx import onnx_api


@pytest.fixture
def seen(monkeypatch):
    """What the checker and shape inference were handed: ("check"|"infer", bytes or proto)."""
    calls: list[tuple[str, object]] = []
    check, infer = onnx_api.check_model, onnx_api.infer_shapes

    def spy_check(model, *a, **k):
        calls.append(("check", model))
        return check(model, *a, **k)

    def spy_infer(model, *a, **k):
        calls.append(("infer", model))
        return infer(model, *a, **k)

    monkeypatch.setattr(onnx_api, "check_model", spy_check)
    monkeypatch.setattr(onnx_api, "infer_shapes", spy_infer)
    return calls


def _model(dims=(1, 4), nodes=None) -> onnx.ModelProto:
    nodes = nodes or [helper.make_node("Relu", ["x"], ["h"], name="r"), helper.make_node("Neg", ["h"], ["y"], name="n")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(dims))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_file_bytes_go_to_the_checker_unserialized(tmp_path, light_dir, seen):
    """The checker reads the file's bytes; inference a proto (the graph outputs' declared types are set
    aside for it, see declared_outputs.py: serializing SqueezeNet's 15 KB costs ~0.02 ms)."""
    path = light_dir / "light_squeezenet.onnx"
    model = load_onnx(path)
    data = path.read_bytes()
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("infer", False)]
    assert seen[0][1] == data
    seen.clear()
    again = load_onnx(data)  # bytes: the same
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("infer", False)]
    assert [n.op_type for n in again.graph.nodes] == [n.op_type for n in model.graph.nodes]
    assert [v.type for n in again.graph.nodes for v in n.outputs] == \
        [v.type for n in model.graph.nodes for v in n.outputs]


def test_declared_output_shapes_are_inferred_without_them_on_a_proto(light_dir, seen):
    """The checker reads the file's bytes; inference the proto whose output declarations were set aside."""
    path = light_dir / "light_squeezenet.onnx"
    model = load_onnx(path)
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("infer", False)]
    assert not any(vi.type.HasField("tensor_type") for vi in seen[1][1].graph.output)
    assert model.graph.outputs[0].type == onnx_type(onnx.load(path).graph.output[0])  # agreeing: kept as declared
    assert not model.graph.declared_outputs


def onnx_type(vi: onnx.ValueInfoProto):
    from nnrt_core.frontends.onnx.convert import type_from_proto
    return type_from_proto(vi.type)


def test_a_changed_proto_is_serialized_again(seen):
    data = _model(dims=("N", 4)).SerializeToString()
    model = load_onnx(data, input_shapes={"x": [3, 4]})  # the input shape changed: inference must see it
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("infer", False)]
    assert model.graph.outputs[0].type.shape == (3, 4)
    seen.clear()
    bad_dims = _model()
    bad_dims.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1  # cleared to unknown before inference
    load_onnx(bad_dims.SerializeToString())
    # a free dim: inference without data propagation, then with it (bounded_inference), both on the proto
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("infer", False), ("infer", False)]


def test_an_unsorted_file_is_checked_again_after_sorting_as_a_proto(seen):
    m = _model(nodes=[helper.make_node("Neg", ["h"], ["y"], name="n"), helper.make_node("Relu", ["x"], ["h"], name="r")])
    model = load_onnx(m.SerializeToString())
    assert [n.name for n in model.graph.nodes] == ["r", "n"]
    assert [(k, isinstance(a, bytes)) for k, a in seen] == [("check", True), ("check", False), ("infer", False)]


def test_external_data_files_are_not_handed_over_as_bytes(tmp_path, seen):
    m = _model(nodes=[helper.make_node("Add", ["x", "w"], ["y"], name="a")])
    w = np.arange(4096, dtype=np.float32).reshape(1, 4096)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 4096
    m.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    model = load_onnx(path)
    assert not any(isinstance(a, bytes) for _, a in seen)
    (add,) = model.graph.nodes
    np.testing.assert_array_equal(add.inputs[1].const, w)


@pytest.mark.parametrize("edit, msg", [
    (lambda m: m.graph.node[0].input.append("nope"), "ONNX model is invalid"),
    (lambda m: setattr(m.graph.node[0], "op_type", "NoSuchOp"), "ONNX model is invalid"),
])
def test_bad_files_still_get_the_checkers_error(tmp_path, edit, msg):
    m = _model()
    edit(m)
    path = tmp_path / "bad.onnx"
    path.write_bytes(m.SerializeToString())
    for source in (path, path.read_bytes(), m):
        with pytest.raises(ModelLoadError, match=msg):
            load_onnx(source)


# ------------------------------------------------------------ constant folding in rounds
class _Counting:
    """The NumPy backend, counting the partitions it compiles and refusing some ops."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        from nnrt_core.registry import default_registry
        self.inner = default_registry().backend("numpy").backend
        self.refuse = refuse
        self.compiled: list[list[str]] = []

    def capability(self, graph, options):
        cap = self.inner.capability(graph, options)
        for n in graph.nodes:
            if n.op_type in self.refuse:
                cap.supported.discard(n.name)
                cap.rejected[n.name] = "refused by the test"
        return cap

    def compile(self, graph, options):
        self.compiled.append([n.name for n in graph.nodes])
        return self.inner.compile(graph, options)


def _weights_model(neg_dims: bool = False) -> onnx.ModelProto:
    """Three independent weights (a ConstantOfShape, folded on the host unless its shape is
    negative, an Expand and a Range), a chain on one of them."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, -3] if neg_dims else [2, 3])
    shape2 = helper.make_tensor("shape2", TensorProto.INT64, [2], [2, 3])
    lims = [helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in (("s", 0.0), ("e", 6.0), ("d", 1.0),
                                                                              ("two", 2.0))]
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["w0"], name="make_w0",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        helper.make_node("Expand", ["two", "shape2"], ["w1"], name="make_w1"),
        helper.make_node("Range", ["s", "e", "d"], ["r"], name="range"),
        helper.make_node("Reshape", ["r", "shape2"], ["w2"], name="reshape_r"),  # reads "range": next round
        helper.make_node("Add", ["x", "w0"], ["a"], name="add0"),
        helper.make_node("Mul", ["a", "w1"], ["b"], name="mul1"),
        helper.make_node("Add", ["b", "w2"], ["y"], name="add2"),
    ]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [shape, shape2, *lims])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_independent_constant_nodes_are_evaluated_in_one_partition_per_round():
    from nnrt_core.passes import fold_constants
    g = load_onnx(_weights_model(), check=False).graph
    ev = _Counting()
    assert fold_constants(g, ev) == 4
    # make_w0 and the Reshape of the next round: on the host
    assert ev.compiled == [["make_w1", "range"]]
    assert [n.name for n in g.nodes] == ["add0", "mul1", "add2"]
    np.testing.assert_array_equal(g.initializers["w0"].const, np.full((2, 3), 0.5, np.float32))
    np.testing.assert_array_equal(g.initializers["w1"].const, np.full((2, 3), 2.0, np.float32))
    np.testing.assert_array_equal(g.initializers["w2"].const, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_a_refused_node_stays_and_the_rest_of_its_round_folds():
    from nnrt_core.passes import fold_constants
    g = load_onnx(_weights_model(), check=False).graph
    ev = _Counting(refuse=frozenset({"Range"}))
    assert fold_constants(g, ev) == 2
    assert ev.compiled == [["make_w1"]]  # make_w0 on the host
    assert [n.name for n in g.nodes] == ["range", "reshape_r", "add0", "mul1", "add2"]


def test_a_node_failing_at_evaluation_stays_and_the_others_fold_alone(caplog):
    from nnrt_core.passes import fold_constants
    g = load_onnx(_weights_model(neg_dims=True), check=False).graph
    ev = _Counting()
    with caplog.at_level("INFO", logger="nnrt.passes"):
        assert fold_constants(g, ev) == 3
    assert ev.compiled[0] == ["make_w0", "make_w1", "range"]  # the round failed: each node alone
    assert ["make_w0"] in ev.compiled and ["make_w1"] in ev.compiled and ["range"] in ev.compiled
    assert [n.name for n in g.nodes] == ["make_w0", "add0", "mul1", "add2"]
    assert "constant folding skipped make_w0 (ConstantOfShape)" in caplog.text and "negative" in caplog.text


# ------------------------------------------------------------ export written in place
def test_export_writes_each_value_its_own_type(light_dir):
    from nnrt_core.frontends import to_onnx
    model = load_onnx(light_dir / "light_squeezenet.onnx")
    proto = to_onnx(model)
    onnx.checker.check_model(proto)
    want = {v.name: v.type for n in model.graph.nodes for v in n.outputs if v.type is not None}
    got = {vi.name: vi.type for vi in proto.graph.value_info}
    outputs = {v.name for v in model.graph.outputs}
    assert set(got) == set(want) - outputs
    back = load_onnx(proto.SerializeToString())  # the types as they were, each under its own name
    assert {v.name: v.type for n in back.graph.nodes for v in n.outputs} == \
        {v.name: v.type for n in model.graph.nodes for v in n.outputs}
    first, second = proto.graph.value_info[0], proto.graph.value_info[1]  # copies of one cached type
    first.type.tensor_type.elem_type = TensorProto.DOUBLE
    assert second.type.tensor_type.elem_type == TensorProto.FLOAT


# ------------------------------------------------------------ shape inference without the weights
def _weighty_model() -> onnx.ModelProto:
    """Conv weights as an initializer and as a Constant node, an int64 shape
    initializer Reshape reads (kept: a shape), a declared value_info, and an
    initializer also listed as a graph input (IR < 4 style)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((8, 64, 3, 3)).astype(np.float32)
    b = rng.standard_normal((8, 8 * 2 * 2)).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["w2"], name="c_w2", value=onnx.numpy_helper.from_array(w2, "w2v")),
        helper.make_node("Conv", ["x", "w"], ["h"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["h2"], name="relu"),
        helper.make_node("Conv", ["h2", "w2"], ["h3"], name="conv2", strides=[4, 4]),
        helper.make_node("Reshape", ["h3", "shape"], ["flat"], name="flat"),
        helper.make_node("Gemm", ["flat", "b"], ["y"], name="fc", transB=1),
    ]
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b"),
             onnx.numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    g = helper.make_graph(nodes, "weighty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                                             helper.make_tensor_value_info("b", TensorProto.FLOAT, [8, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])], inits,
                          value_info=[helper.make_tensor_value_info("h2", TensorProto.FLOAT, [1, 64, None, None])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_lean_inference_gives_the_bytes_full_inference_gives(monkeypatch, light_dir, seen):
    from nnrt_core.frontends.onnx import lean_inference
    from nnrt_core.frontends.onnx.onnx_api import P
    monkeypatch.setattr(lean_inference, "LEAN_MIN_BYTES", 0)
    weighty = _weighty_model().SerializeToString()
    for data in (weighty, *(p.read_bytes() for p in sorted(light_dir.glob("*.onnx")))):
        full = onnx_api.infer_shapes(data, strict_mode=False, data_prop=True)
        seen.clear()
        lean = lean_inference.infer_shapes_lean(P.ModelProto.FromString(data), data, owned=True)
        assert lean.SerializeToString() == full.SerializeToString()
        ((_, sent),) = seen
        if data is weighty:  # inference saw the model without its weights
            assert sent.ByteSize() < len(data) // 4


def test_lean_inference_strips_weights_only(monkeypatch, seen):
    from nnrt_core.frontends.onnx import lean_inference
    monkeypatch.setattr(lean_inference, "LEAN_MIN_BYTES", 0)
    model = load_onnx(_weighty_model().SerializeToString())
    ((_, checked), (_, sent)) = seen
    assert isinstance(checked, bytes)
    assert [t.name for t in sent.graph.initializer] == ["b", "shape"]  # "b" is a graph input: kept; shape: int64
    assert [n.name for n in sent.graph.node] == ["conv1", "relu", "conv2", "flat", "fc"]  # Constant w2 left out
    assert [vi.name for vi in sent.graph.input] == ["x", "b", "w2", "w"]
    conv2, flat = model.graph.nodes[3], model.graph.nodes[4]
    assert conv2.outputs[0].type.shape == (1, 8, 2, 2) and flat.outputs[0].type.shape == (1, 32)
    w2 = model.graph.nodes[0].attributes["value"].value
    assert w2.shape == (8, 64, 3, 3) and float(np.abs(w2).sum()) > 0  # the weights themselves are all there


def test_a_callers_model_proto_is_not_modified_and_small_models_take_the_plain_path(monkeypatch, seen):
    from nnrt_core.frontends.onnx import lean_inference
    proto = _weighty_model()
    before = proto.SerializeToString()
    load_onnx(proto)
    assert proto.SerializeToString() == before
    sent = seen[-1][1]  # a copy of the caller's proto, its output declarations set aside: the plain path
    assert sent is not proto and len(sent.graph.initializer) == len(proto.graph.initializer)
    seen.clear()
    load_onnx(before)  # a few KB: below LEAN_MIN_BYTES
    assert len(seen[-1][1].graph.initializer) == len(proto.graph.initializer)
    monkeypatch.setattr(lean_inference, "LEAN_MIN_BYTES", 0)
    seen.clear()
    load_onnx(_model().SerializeToString())  # nothing large: the lean model is the whole model, as bytes or not
    assert seen[-1][0] == "infer"


def test_a_lean_inference_that_fails_falls_back_to_the_whole_model(monkeypatch, seen):
    from nnrt_core.frontends.onnx import lean_inference

    def broken(proto):
        raise ValueError("lean copy failed")
    monkeypatch.setattr(lean_inference, "LEAN_MIN_BYTES", 0)
    monkeypatch.setattr(lean_inference, "_without_weights", broken)
    data = _weighty_model().SerializeToString()
    model = load_onnx(data)
    assert [k for k, _ in seen] == ["check", "infer"]  # the plain path, on the whole model
    assert len(seen[-1][1].graph.initializer) == 3
    assert model.graph.nodes[4].outputs[0].type.shape == (1, 32)


def test_a_build_pauses_the_collector_and_gives_it_back(monkeypatch):
    """``compile_model`` runs with the cyclic GC paused (nnrt_core/gc_pause.py) and
    leaves it as it found it, after a failed build too."""
    import gc

    from nnrt_core import ScheduleConfig, Session
    from nnrt_core.compiler import from_source as build  # the source-model stages
    from nnrt_core.errors import NnrtError

    seen = []
    optimize = build.optimize

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return optimize(*a, **k)

    monkeypatch.setattr(build, "optimize", spy)
    assert gc.isenabled()
    Session(_model(), ScheduleConfig(backends=["numpy"]))
    assert seen == [False] and gc.isenabled()
    with pytest.raises(NnrtError):
        Session(_model(nodes=[helper.make_node("NoSuchOp", ["x"], ["y"], name="bad")]),
                ScheduleConfig(backends=["numpy"]))
    assert gc.isenabled()
    gc.disable()
    try:
        Session(_model(), ScheduleConfig(backends=["numpy"]))
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
