"""Build shortcuts that must not change what a build produces: the deferred
placement report and estimates, the whole-graph partition handed over without
a copy, the memo of IR nodes that passed validation, the capability check's
per-node facts reused by the compile, ordered graphs left unsorted and
unwalked, and passes skipped when their trigger ops are absent."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend.facts import recall, remember, shared_facts
from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends import load_onnx, validate_graph
from nnrt_core.frontends.onnx import node_facts
from nnrt_core.frontends.onnx import validate as validation
from nnrt_core.ir import Attribute, AttrKind
from nnrt_core.placement.partitioning import partition_graph, whole_graph_view
from nnrt_numpy.backend import NumpyBackend
from nnrt_numpy.stored import pack

X = {"x": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)}


def _model(nodes, inputs=("x",), outputs=("y",), inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(i, TensorProto.FLOAT, [2, 3]) for i in inputs],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 3]) for o in outputs],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _chain() -> onnx.ModelProto:
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], np.arange(6, dtype=np.float32).tolist())
    return _model([helper.make_node("Mul", ["x", "w"], ["t0"], name="mul"),
                   helper.make_node("Relu", ["t0"], ["t1"], name="relu"),
                   helper.make_node("Neg", ["t1"], ["y"], name="neg"),
                   helper.make_node("Abs", ["t1"], ["z"], name="abs")], outputs=("y", "z"), inits=[w])


def test_placement_report_and_estimates_are_computed_when_read_with_the_same_content():
    sess = Session(_chain(), ScheduleConfig(backends=["numpy"]))
    cm = sess.compiled_model
    assert "placement" not in vars(cm) and "estimates" not in vars(cm)  # nothing computed at build
    report = sess.placement_report
    assert [(p.node, p.backend, p.partition, p.reason) for p in report] == [
        (n, "numpy", 0, "chosen by priority") for n in ("mul", "relu", "neg", "abs")]
    assert sess.placement_report is report  # computed once
    assert cm.estimates[0][1] == "analytic" and cm.estimates[0][0] > 0
    assert sess.partitions[0].details["estimate_source"] == "analytic"


def test_fallback_events_are_added_at_build_before_the_report_is_read():
    npu = make_fake_backend("npu", ["Relu", "Neg"], priority=100)
    sess = Session(_chain(), ScheduleConfig(backends=["npu"], backup="numpy"), registry=make_registry(fake_plugin(npu)))
    assert "placement" not in vars(sess.compiled_model)
    fallbacks = [e for e in sess.events if e.kind == "node_fallback"]
    assert len(fallbacks) == 1 and fallbacks[0].nodes == ["mul", "abs"] and fallbacks[0].backend == "numpy"
    reasons = {p.node: p.reason for p in sess.placement_report}
    assert reasons == {"mul": "backup: no selected backend supports it", "relu": "chosen by priority",
                       "neg": "chosen by priority", "abs": "backup: no selected backend supports it"}


def test_whole_graph_partition_is_a_view_with_the_copys_structure_and_outputs():
    graph = load_onnx(_chain()).graph
    plan = partition_graph(graph, {n.name: "numpy" for n in graph.nodes})[0]
    view, copy = plan.to_graph(graph, share=True), plan.to_graph(graph)
    assert view.nodes[0] is graph.nodes[0] and copy.nodes[0] is not graph.nodes[0]
    for g in (view, copy):
        assert g.name == "p0_numpy" and [v.name for v in g.outputs] == ["y", "z"]
    assert sorted(view.initializers) == sorted(copy.initializers) == ["w"]
    assert pack(view) == pack(copy)  # the stored form is the same bytes
    backend = NumpyBackend()
    opts = ScheduleConfig().compile_options("numpy")
    a, b = backend.compile(view, opts).run(X), backend.compile(copy, opts).run(X)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    sess = Session(_chain(), ScheduleConfig(backends=["numpy"]))
    assert sess.executor.steps[0].compiled.graph.nodes[0] is sess.graph.nodes[0]  # NumPy: no copy


def test_partitions_that_are_not_the_whole_graph_are_copied():
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], inputs=("x", "unused"))
    graph = load_onnx(m).graph
    plan = partition_graph(graph, {"relu": "numpy"})[0]
    assert [v.name for v in plan.inputs] == ["x"] and whole_graph_view(graph, plan) is None  # an input dropped
    sess = Session(m, ScheduleConfig(backends=["numpy"]))
    assert sess.executor.steps[0].compiled.graph.nodes[0] is not sess.graph.nodes[0]
    np.testing.assert_array_equal(sess.run({**X, "unused": X["x"]})["y"], np.maximum(X["x"], 0))
    npu = make_fake_backend("npu", ["Relu", "Neg"], priority=100)  # several partitions: each a copy
    sess = Session(_chain(), ScheduleConfig(backends=["npu"], backup="numpy"), registry=make_registry(fake_plugin(npu)))
    assert len(sess.partitions) > 1 and all(st.compiled.graph.nodes[0] not in sess.graph.nodes
                                            for st in sess.executor.steps if st.backend.name == "numpy")


def test_validation_memo_skips_repeated_facts_and_still_names_a_bad_node(monkeypatch):
    node_facts.PASSED.clear()
    nodes = [helper.make_node("Transpose", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"], name=f"tr{i}",
                              perm=[0, 1]) for i in range(4)]
    graph = load_onnx(_model(nodes + [helper.make_node("Relu", ["t3"], ["y"], name="relu")])).graph
    checked = []
    real = validation.validate_node
    monkeypatch.setattr(validation, "validate_node",
                        lambda view, *a, **k: (checked.append(view.desc), real(view, *a, **k)))
    validate_graph(graph)
    assert checked == ["node 'tr0' (Transpose)", "node 'relu' (Relu)"]  # tr1..tr3: the same facts as tr0
    graph.nodes[2].attributes["perm"] = Attribute("perm", AttrKind.INTS, [0, 99])  # other facts: checked, refused
    with pytest.raises(ModelLoadError, match=r"node 'tr2' \(Transpose\): attribute 'perm'"):
        validate_graph(graph)
    graph.nodes[2].attributes["perm"] = Attribute("perm", AttrKind.INTS, np.array([0, 1]))  # an IR array: same facts
    checked.clear()
    validate_graph(graph)
    assert checked == []


def test_node_facts_are_recalled_only_for_the_same_node_inside_the_scope():
    graph = load_onnx(_chain()).graph
    a, b = graph.nodes[0], graph.nodes[1]
    remember("t", a, 1)  # no scope: nothing kept
    assert recall("t", a) is None
    with shared_facts():
        remember("t", a, 1)
        assert recall("t", a) == 1 and recall("t", b) is None and recall("other", a) is None
        with shared_facts():  # a nested build has its own scope
            assert recall("t", a) is None
        assert recall("t", a) == 1
    assert recall("t", a) is None


def test_numpy_compile_reuses_the_capability_checks_node_info(monkeypatch):
    from nnrt_numpy import program

    graph = load_onnx(_chain()).graph
    calls = []
    real = program.node_info
    monkeypatch.setattr(program, "node_info",
                        lambda node, *a, **k: (calls.append(node.name), real(node, *a, **k))[1])
    backend, opts = NumpyBackend(), ScheduleConfig().compile_options("numpy")
    plan = partition_graph(graph, {n.name: "numpy" for n in graph.nodes})[0]
    with shared_facts():
        assert backend.capability(graph, opts).supported == {"mul", "relu", "neg", "abs"}
        out = backend.compile(plan.to_graph(graph, share=True), opts).run(X)
    assert calls == ["mul", "relu", "neg", "abs"]  # once per node, at the capability check
    calls.clear()
    again = backend.compile(plan.to_graph(graph, share=True), opts).run(X)  # outside the scope: checked again
    assert calls == ["mul", "relu", "neg", "abs"]
    assert all(np.array_equal(out[k], again[k]) for k in out)


def test_ordered_graphs_skip_the_sort_and_the_partition_walk_with_the_same_result():
    graph = load_onnx(_chain()).graph
    nodes = list(graph.nodes)
    assert graph.is_topologically_sorted()
    graph.topological_sort()
    assert graph.nodes == nodes
    plans = partition_graph(graph, {n.name: "numpy" for n in graph.nodes})
    assert len(plans) == 1 and plans[0].nodes == nodes and [v.name for v in plans[0].outputs] == ["y", "z"]
    graph.nodes = [nodes[2], nodes[0], nodes[3], nodes[1]]  # neg, mul, abs, relu: out of order
    assert not graph.is_topologically_sorted()
    plans = partition_graph(graph, {n.name: "numpy" for n in graph.nodes})  # the walk orders it
    assert [n.name for n in plans[0].nodes] == ["mul", "relu", "neg", "abs"]
    graph.topological_sort()
    assert [n.name for n in graph.nodes] == ["mul", "relu", "neg", "abs"] and graph.is_topologically_sorted()


def test_passes_whose_trigger_ops_are_absent_are_skipped_and_still_reported(monkeypatch):
    from nnrt_core.passes import PassManager
    from nnrt_core.passes.affine_folding import AffineFolding
    from nnrt_core.passes.cleanup import IdentityElimination

    ran = []
    for cls in (AffineFolding, IdentityElimination):
        real = cls.run
        monkeypatch.setattr(cls, "run", lambda self, g, ctx=None, _real=real:
                            (ran.append(self.name), _real(self, g, ctx))[1])
    graph = load_onnx(_chain()).graph  # Mul, Relu, Neg, Abs: no Conv/BN, no Identity/Dropout/Cast
    report = PassManager("basic").run(graph)
    assert ran == [] and report.passes["conv_bn_folding"].rewrites == 0 and "identity_elimination" in report.passes
    m = _model([helper.make_node("Identity", ["x"], ["t"], name="id"),
                helper.make_node("Relu", ["t"], ["y"], name="r")])
    graph = load_onnx(m).graph
    report = PassManager("basic").run(graph)
    assert "identity_elimination" in ran and report.passes["identity_elimination"].rewrites == 1
    assert [n.op_type for n in graph.nodes] == ["Relu"]


def test_whole_graph_view_takes_the_plans_input_order():
    m = _model([helper.make_node("Sub", ["b", "a"], ["y"], name="sub")], inputs=("a", "b"))
    graph = load_onnx(m).graph
    plan = partition_graph(graph, {"sub": "numpy"})[0]
    view, copy = plan.to_graph(graph, share=True), plan.to_graph(graph)
    assert view.nodes[0] is graph.nodes[0]
    assert [v.name for v in view.inputs] == [v.name for v in copy.inputs] == ["b", "a"]
    sess = Session(m, ScheduleConfig(backends=["numpy"]))
    assert sess.executor.steps[0].compiled.graph.nodes[0] is sess.graph.nodes[0]
    a, b = X["x"], X["x"][::-1].copy()
    np.testing.assert_array_equal(sess.run({"a": a, "b": b})["y"], b - a)


def test_validation_memo_checks_a_node_with_unhashable_facts_every_time(monkeypatch):
    """A facts key that cannot be hashed (a 2-D array in an INTS attribute) is neither looked up
    nor remembered: the node is checked at every validation, and nothing raises TypeError."""
    node_facts.PASSED.clear()
    graph = load_onnx(_model([helper.make_node("Transpose", ["x"], ["t0"], name="tr0", perm=[0, 1]),
                              helper.make_node("Relu", ["t0"], ["y"], name="relu")])).graph
    graph.nodes[0].attributes["perm"] = Attribute("perm", AttrKind.INTS, np.array([[0, 1]]))
    node_facts.PASSED.clear()  # the proto nodes' keys of the load
    checked = []
    monkeypatch.setattr(validation, "validate_node", lambda view, *a, **k: checked.append(view.desc))
    for _ in range(2):
        validate_graph(graph)
    assert checked == ["node 'tr0' (Transpose)", "node 'relu' (Relu)", "node 'tr0' (Transpose)"]
    assert len(node_facts.PASSED) == 1  # only the Relu's facts
