"""Priority placement, backup, partitioning without cycles, compile fallback."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError, UnsupportedNodeError
from nnrt_core.frontends import load_onnx
from nnrt_core.placement import merge_islands, partition_graph


def model(nodes, inputs=("x",), outputs=("y",), shape=(2, 3)) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes, "m",
        [helper.make_tensor_value_info(i, TensorProto.FLOAT, list(shape)) for i in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, list(shape)) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def chain(*ops: str) -> onnx.ModelProto:
    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [prev], [out], name=f"{op.lower()}{i}"))
        prev = out
    return model(nodes)


def reference(m: onnx.ModelProto, feeds):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(m).run(None, feeds)


X = {"x": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)}


def test_priority_places_on_first_supporting_backend_and_backup_takes_rest():
    npu = make_fake_backend("npu", ["Relu", "Neg"], priority=100)
    reg = make_registry(fake_plugin(npu))
    m = chain("Relu", "Neg", "Abs", "Relu")
    sess = Session(m, ScheduleConfig(backends=["npu"], backup="numpy"), registry=reg)
    assert sess.placement == {"relu0": "npu", "neg1": "npu", "abs2": "numpy", "relu3": "npu"}
    assert [p.backend for p in sess.partitions] == ["npu", "numpy", "npu"]
    assert sess.partitions[0].outputs == ("t1",) and sess.partitions[1].inputs == ("t1",)
    report = {p.node: p for p in sess.placement_report}
    assert report["abs2"].reason.startswith("backup") and "npu" in report["abs2"].rejected
    assert any(e.kind == "node_fallback" and e.nodes == ["abs2"] for e in sess.events)
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0])


def test_order_of_backends_is_priority():
    a = make_fake_backend("a", ["Relu", "Neg"])
    b = make_fake_backend("b", ["Relu", "Neg", "Abs"])
    reg = make_registry(fake_plugin(a, b))
    sess = Session(chain("Relu", "Neg", "Abs"), ScheduleConfig(backends=["b", "a"]), registry=reg)
    assert set(sess.placement.values()) == {"b"} and len(sess.partitions) == 1
    sess = Session(chain("Relu", "Neg", "Abs"), ScheduleConfig(backends=["a", "b"]), registry=reg)
    assert sess.placement == {"relu0": "a", "neg1": "a", "abs2": "b"}


def test_auto_orders_by_default_priority():
    hi = make_fake_backend("hi", ["Relu"], priority=500, emulated=False)  # auto takes real engines only
    reg = make_registry(fake_plugin(hi))
    sess = Session(chain("Relu", "Abs"), ScheduleConfig(backends="auto"), registry=reg)
    assert sess.placement == {"relu0": "hi", "abs1": "numpy"}


def test_naive_merge_would_create_cycle():
    # A(npu) -> B(numpy) -> C(npu) and A -> C: putting A and C in one partition
    # would make it both feed and consume B's partition.
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="A"),
             helper.make_node("Abs", ["a"], ["b"], name="B"),
             helper.make_node("Add", ["a", "b"], ["y"], name="C")]
    m = model(nodes)
    npu = make_fake_backend("npu", ["Relu", "Add"], priority=100)
    reg = make_registry(fake_plugin(npu))
    sess = Session(m, ScheduleConfig(backends=["npu"]), registry=reg)
    assert [(p.backend, p.nodes) for p in sess.partitions] == [("npu", ("A",)), ("numpy", ("B",)), ("npu", ("C",))]
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0])


def test_partitions_are_maximal_and_acyclic_on_branches():
    # two independent branches of npu ops joined by a numpy op, then npu again
    nodes = [helper.make_node("Relu", ["x"], ["a1"], name="a1"),
             helper.make_node("Neg", ["a1"], ["a2"], name="a2"),
             helper.make_node("Relu", ["x"], ["b1"], name="b1"),
             helper.make_node("Neg", ["b1"], ["b2"], name="b2"),
             helper.make_node("Sub", ["a2", "b2"], ["c"], name="join"),
             helper.make_node("Relu", ["c"], ["y"], name="tail")]
    g = load_onnx(model(nodes)).graph
    assignment = {"a1": "npu", "a2": "npu", "b1": "npu", "b2": "npu", "join": "numpy", "tail": "npu"}
    plans = partition_graph(g, assignment)
    assert [(p.backend, p.node_names()) for p in plans] == [
        ("npu", ["a1", "a2", "b1", "b2"]), ("numpy", ["join"]), ("npu", ["tail"])]
    # partition dependency order is topological
    producer = {v.name: p.index for p in plans for v in p.outputs}
    for p in plans:
        assert all(producer.get(v.name, -1) < p.index for v in p.inputs)


def test_unsupported_everywhere_is_one_clear_error():
    npu = make_fake_backend("npu", ["Relu"])
    reg = make_registry(fake_plugin(npu))
    with pytest.raises(UnsupportedNodeError) as e:
        Session(chain("Relu", "Abs", "Neg"), ScheduleConfig(backends=["npu"], backup=None), registry=reg)
    msg = str(e.value)
    assert "2 node(s)" in msg and "abs1 (Abs" in msg and "neg2 (Neg" in msg and "npu only runs" in msg


def test_pins_override_priority_and_are_validated():
    npu = make_fake_backend("npu", ["Relu", "Neg"], priority=100)
    reg = make_registry(fake_plugin(npu))
    cfg = ScheduleConfig(backends=["npu"], pins={"neg1": "numpy"})
    sess = Session(chain("Relu", "Neg"), cfg, registry=reg)
    assert sess.placement == {"relu0": "npu", "neg1": "numpy"}
    assert {p.node: p.reason for p in sess.placement_report}["neg1"] == "pinned by config"
    with pytest.raises(ConfigError, match="pin names unknown node 'nope'"):
        Session(chain("Relu"), ScheduleConfig(backends=["npu"], pins={"nope": "npu"}), registry=reg)
    with pytest.raises(ConfigError, match="backend is not selected"):
        Session(chain("Relu"), ScheduleConfig(backends=["npu"], backup=None, pins={"relu0": "numpy"}),
                registry=reg)
    with pytest.raises(UnsupportedNodeError, match="pinned to 'npu', which rejects it"):
        Session(chain("Abs"), ScheduleConfig(backends=["npu"], pins={"abs0": "npu"}), registry=reg)


def test_compile_failure_re_places_nodes_visibly():
    npu = make_fake_backend("npu", ["Relu", "Neg"], priority=100, fail_compile_ops=["Neg"])
    reg = make_registry(fake_plugin(npu))
    m = chain("Relu", "Neg", "Abs")
    sess = Session(m, ScheduleConfig(backends=["npu"]), registry=reg)
    assert set(sess.placement.values()) == {"numpy"}
    ev = [e for e in sess.events if e.kind == "compile_fallback"]
    assert ev and ev[0].backend == "npu" and "out of device memory" in ev[0].message
    assert set(ev[0].nodes) == {"relu0", "neg1"}
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0])


def test_unavailable_backend_falls_back_to_backup_with_report():
    ghost = make_fake_backend("ghost", ["Relu", "Neg", "Abs"], unavailable="device /dev/ghost0 missing")
    reg = make_registry(fake_plugin(ghost))
    sess = Session(chain("Relu", "Neg"), ScheduleConfig(backends=["ghost"], backup="numpy"), registry=reg)
    assert set(sess.placement.values()) == {"numpy"}
    assert [(e.kind, e.backend) for e in sess.events][0] == ("backend_unavailable", "ghost")
    assert "device /dev/ghost0 missing" in sess.events[0].message
    with pytest.raises(ConfigError, match="no usable backend"):
        Session(chain("Relu"), ScheduleConfig(backends=["ghost"], backup=None), registry=reg)


def test_device_memory_backend_copies_only_across_devices():
    npu = make_fake_backend("npu", ["Relu", "Neg", "Add"], priority=100, device_memory=True)
    reg = make_registry(fake_plugin(npu))
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Neg", ["a"], ["b"], name="n"),
             helper.make_node("Abs", ["b"], ["c"], name="abs"),
             helper.make_node("Add", ["c", "b"], ["y"], name="add")]
    m = model(nodes)
    sess = Session(m, ScheduleConfig(backends=["npu"]), registry=reg)
    assert [p.backend for p in sess.partitions] == ["npu", "numpy", "npu"]
    backend = reg.backend("npu").backend
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0])
    # x -> device; b -> host (for abs); c -> device (b is already there); y -> host
    assert (backend.to_device_calls, backend.to_host_calls) == (2, 2)
    assert sess.stats()["host_device_copies"] == 4


def test_merge_islands_moves_only_sandwiched_islands_that_pay_off():
    # a(npu) -> b(numpy) -> c(npu, cheap island) -> d(numpy) -> e(npu)
    g = load_onnx(chain("Relu", "Abs", "Neg", "Abs", "Relu")).graph
    names = [n.name for n in g.nodes]
    assignment = dict(zip(names, ["npu", "numpy", "npu", "numpy", "npu"]))
    transfer = lambda v, src, dst: 0.0 if src == dst or "npu" not in (src, dst) else 1e-3  # noqa: E731
    npu_ops = lambda n, b: b == "numpy" or not n.startswith("abs")  # noqa: E731 - npu cannot run Abs
    kwargs = dict(can_run=npu_ops, transfer_seconds=transfer, switch_seconds=lambda b: 1e-5)
    merged, moves = merge_islands(g, assignment, island_seconds=lambda nodes, b: 1e-6 * len(nodes), **kwargs)
    # only neg2 sits between two numpy partitions; relu0/relu4 are at the ends
    assert [(m.nodes, m.source, m.target) for m in moves] == [(["neg2"], "npu", "numpy")]
    assert merged["neg2"] == "numpy" and merged["relu0"] == merged["relu4"] == "npu"
    assert [p.backend for p in partition_graph(g, merged)] == ["npu", "numpy", "npu"]
    # too expensive on numpy, or pinned: stays
    slow_cpu = lambda nodes, b: 1.0 if b == "numpy" else 1e-6  # noqa: E731
    assert merge_islands(g, assignment, island_seconds=slow_cpu, **kwargs)[1] == []
    assert merge_islands(g, assignment, island_seconds=lambda nodes, b: 1e-6, locked={"neg2"}, **kwargs)[1] == []
