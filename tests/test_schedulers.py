"""Schedulers from entry points: cost (measured plans, cost models, cache),
policies, island merging, sub-graph nodes, overlapped execution, bad input."""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Mapping

import numpy as np
import pytest
from onnx import TensorProto, helper

import nnrt_schedulers.cost as cost_plugin
import nnrt_schedulers.policies as policy_plugin
from conftest import make_registry
from fakes import FakeBackend, _FakePartition, fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError, UnsupportedNodeError
from nnrt_core.registry import Registry
from test_partitioning import X, chain, model, reference


# ------------------------------------------------------------------ fakes
class _TimedPartition(_FakePartition):
    """Sleeps ``delay`` per node and records (name, start, end) of every run."""

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        start = time.perf_counter()
        time.sleep(self.fake.delay * len(self.program_nodes))
        out = super()._run(inputs)
        self.fake.log.append((self.name, start, time.perf_counter()))
        return out

    def run_async(self, inputs: Mapping[str, Any]) -> "Future[dict[str, Any]]":
        if self.fake.queue is None:
            return super().run_async(inputs)
        return self.fake.queue.submit(self.run, inputs)  # a device queue: runs in the background


def timed_backend(name: str, ops, *, delay: float, device_memory: bool = False, device_type: str = "cpu",
                  priority: int = 0, estimate: float | None = None) -> type[FakeBackend]:
    """A fake backend whose partitions take ``delay`` seconds per node; with
    ``estimate`` it also has a cost model answering that many seconds per node."""
    base = make_fake_backend(name, ops, priority=priority, device_memory=device_memory, device_type=device_type)

    def __init__(self):
        base.__init__(self)
        self.log = []
        self.queue = ThreadPoolExecutor(1, thread_name_prefix=f"{name}-queue") if device_memory else None

    def _compile(self, graph, options):
        part = _TimedPartition(self, graph)
        part.program_nodes = list(graph.nodes)
        if estimate is not None:
            part.estimated_seconds = lambda: estimate * len(graph.nodes)
        return part

    attrs = {"delay": delay, "__init__": __init__, "_compile": _compile}
    if estimate is not None:
        attrs["_estimate_cost"] = lambda self, graph, options: {n.name: estimate for n in graph.nodes}
    return type(f"Timed_{name}", (base,), attrs)


def fp16_engine(fp16_outputs, *, fp32_delay: float = 0.003, ops=None):
    """A real engine (class) whose device offers fp16: its fp32 plans are exact and
    take ``fp32_delay`` per node (``ops``: those it runs, default ELEMENTWISE); its fp16 plans run without delay and return
    ``fp16_outputs(exact outputs)`` (the reduced format's error)."""
    from nnrt_core.backend import DeviceInfo

    base = timed_backend("chip", ELEMENTWISE if ops is None else ops, delay=fp32_delay, device_type="cpu")

    class Chip(base):
        emulated = False
        supported_options = frozenset({"num_threads", "precision"})

        def devices(self):
            return [DeviceInfo("chip:0", "chip", "cpu", {}, ("fp32", "fp16"))]

        def _compile(self, graph, options):
            part = base._compile(self, graph, options)
            if options.precision == "fp16":
                part._run = lambda inputs: fp16_outputs(_FakePartition._run(part, inputs))
            return part

    return Chip


def registry(*backends) -> Registry:
    return make_registry(fake_plugin(*backends), cost_plugin, policy_plugin)


ELEMENTWISE = ["Relu", "Neg", "Abs", "Add", "Sub", "Sigmoid", "Tanh"]


# -------------------------------------------------------------- discovery
def test_schedulers_are_discovered_through_entry_points():
    reg = Registry(env={})  # real entry points of the installed schedulers distribution
    assert {"priority", "cost", "max_performance", "min_power", "prefer_npu", "prefer_cpu"} <= set(reg.schedulers)
    assert reg.schedulers["cost"].plugin == "cost"
    with pytest.raises(ConfigError, match=r"unknown scheduler 'fastest'; installed schedulers: .*cost.*priority"):
        Session(chain("Relu"), ScheduleConfig(backends=["numpy"], scheduler="fastest"), registry=reg)


# ------------------------------------------------------------------- cost
def test_cost_scheduler_picks_the_measured_faster_backend():
    slow = timed_backend("slow", ELEMENTWISE, delay=0.004, priority=100)
    fast = timed_backend("fast", ELEMENTWISE, delay=0.0)
    reg = registry(slow, fast)
    m = chain("Relu", "Neg", "Abs", "Tanh")
    prio = Session(m, ScheduleConfig(backends=["slow", "fast"]), registry=reg)
    assert set(prio.placement.values()) == {"slow"}
    sess = Session(m, ScheduleConfig(backends=["slow", "fast"], backup=None, scheduler="cost"), registry=reg)
    assert set(sess.placement.values()) == {"fast"} and len(sess.partitions) == 1
    details = sess.partitions[0].details
    assert details["estimate_source"] == "measured" and details["estimated_ms"] < 4
    labels = [p.label for p in sess.compiled_model.scheduler.plans]
    assert labels[0] == "fast only" and "slow only" in labels
    assert all("cost: plan 'fast only'" in r.reason for r in sess.placement_report)
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0], rtol=1e-6)
    # the plans it weighed are public, the chosen one first and cheapest
    considered = sess.considered_plans
    assert [p["label"] for p in considered] == labels
    assert considered[0]["chosen"] and not any(p["chosen"] for p in considered[1:])
    slow_only = next(p for p in considered if p["label"] == "slow only")
    assert slow_only["estimated_ms"] > considered[0]["estimated_ms"]
    assert prio.considered_plans == []  # the priority scheduler weighs no alternatives


def test_considered_plans_survive_save_and_show_in_the_cli(tmp_path, capsys):
    from nnrt_core.tools import cli

    m = chain("Relu", "Neg")
    sess = Session(m, ScheduleConfig(backends=["numpy", "onnxruntime"], scheduler="cost",
                                     cache_dir=str(tmp_path / "cache")))
    considered = sess.considered_plans
    assert len(considered) >= 2 and considered[0]["chosen"]
    assert {"numpy only", "onnxruntime only"} <= {p["label"] for p in considered}
    loaded = Session(sess.save(tmp_path / "m.nnrt"))
    assert loaded.considered_plans == considered
    cli._print_considered(considered)
    out = capsys.readouterr().out
    assert "plans considered by the scheduler" in out and f"-> {considered[0]['label']}" in out


def test_cost_scheduler_caches_measurements_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("NNRT_CACHE_DIR", str(tmp_path))
    slow = timed_backend("slow", ELEMENTWISE, delay=0.002, priority=100)
    fast = timed_backend("fast", ELEMENTWISE, delay=0.0)
    reg = registry(slow, fast)
    cfg = ScheduleConfig(backends=["slow", "fast"], scheduler="cost")
    m = chain("Relu", "Neg", "Abs")
    first = Session(m, cfg, registry=reg)
    assert first.compiled_model.scheduler.measured_partitions > 0
    (profile_file,) = tmp_path.glob("schedule_profiles-v*-*.json")
    assert json.loads(profile_file.read_text())  # backend|options|signature -> seconds
    second = Session(m, cfg, registry=reg)
    assert second.compiled_model.scheduler.measured_partitions == 0  # every timing came from the cache
    assert second.placement == first.placement
    # a different graph (other shapes) is measured again
    third = Session(model([helper.make_node("Relu", ["x"], ["y"], name="r")], shape=(4, 5)), cfg, registry=reg)
    assert third.compiled_model.scheduler.measured_partitions > 0


def test_cost_scheduler_respects_pins_and_capabilities():
    slow = timed_backend("slow", ELEMENTWISE + ["Sin"], delay=0.002, priority=100)
    fast = timed_backend("fast", ["Relu", "Neg", "Abs"], delay=0.0)
    reg = registry(slow, fast)
    m = chain("Relu", "Neg", "Sin", "Abs")
    cfg = ScheduleConfig(backends=["slow", "fast"], backup=None, scheduler="cost", pins={"neg1": "slow"})
    sess = Session(m, cfg, registry=reg)
    assert sess.placement["neg1"] == "slow"  # pinned
    assert sess.placement["sin2"] == "slow"  # only slow runs Sin
    assert {p.node: p.reason for p in sess.placement_report}["neg1"] == "pinned by config"
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0], rtol=1e-6)


def test_cost_scheduler_uses_device_cost_model_and_transfers():
    # the "npu" claims 1 us per node in its cost model (never timed) but keeps
    # tensors in device memory: worth it for a long chain, not for one node
    npu = timed_backend("npu", ELEMENTWISE, delay=0.0, device_memory=True, device_type="npu",
                        priority=100, estimate=1e-6)
    cpu = timed_backend("cpu", ELEMENTWISE, delay=0.0005)
    reg = registry(npu, cpu)
    m = chain(*(["Relu", "Neg"] * 6))
    sess = Session(m, ScheduleConfig(backends=["npu", "cpu"], backup=None, scheduler="cost"), registry=reg)
    assert set(sess.placement.values()) == {"npu"}
    assert sess.partitions[0].details["estimate_source"] == "cost model"
    chosen = sess.compiled_model.scheduler.chosen
    singles = [p for p in sess.compiled_model.scheduler.plans if p.label.endswith(("only", "first"))]
    assert chosen.seconds <= min(p.seconds for p in singles)
    assert chosen.transfer_seconds > 0  # x up, y down
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0], rtol=1e-6)


def test_min_power_and_prefer_policies_use_device_types():
    # delays long enough that a loaded machine's sleep overshoot does not swap the order:
    # time npu 4x cpu, energy npu 2 W x 2 ms < cpu 15 W x 0.5 ms
    npu = timed_backend("npu", ELEMENTWISE, delay=0.002, device_type="npu", priority=10)  # slower, 2 W
    cpu = timed_backend("cpu", ELEMENTWISE, delay=0.0005, device_type="cpu", priority=100)  # faster, 15 W
    reg = registry(npu, cpu)
    m = chain("Relu", "Neg", "Abs")
    cfg = ScheduleConfig(backends=["cpu", "npu"], backup=None)
    assert set(Session(m, cfg.replace(scheduler="max_performance"), registry=reg).placement.values()) == {"cpu"}
    assert set(Session(m, cfg.replace(scheduler="min_power"), registry=reg).placement.values()) == {"npu"}
    assert set(Session(m, cfg.replace(scheduler="prefer_npu"), registry=reg).placement.values()) == {"npu"}
    sess = Session(m, ScheduleConfig(backends=["npu", "cpu"], backup=None, scheduler="prefer_cpu"), registry=reg)
    assert set(sess.placement.values()) == {"cpu"}
    assert "prefer_cpu: preferred cpu backend" in sess.placement_report[0].reason


# ----------------------------------------------------- island merging
def _island_model():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"),
             helper.make_node("Sin", ["a"], ["b"], name="b"),
             helper.make_node("Neg", ["b"], ["c"], name="c"),  # a cheap npu island between numpy nodes
             helper.make_node("Cos", ["c"], ["y"], name="d")]
    return model(nodes)


def test_tiny_island_between_other_backend_partitions_is_merged_visibly():
    npu = make_fake_backend("npu", ["Relu", "Neg"], priority=100, device_memory=True)
    reg = make_registry(fake_plugin(npu))
    m = _island_model()
    sess = Session(m, ScheduleConfig(backends=["npu"]), registry=reg)
    assert sess.placement == {"a": "npu", "b": "numpy", "c": "numpy", "d": "numpy"}
    assert [p.backend for p in sess.partitions] == ["npu", "numpy"]
    ev = [e for e in sess.events if e.kind == "island_merged"]
    assert ev and ev[0].nodes == ["c"] and ev[0].backend == "numpy" and "from 'npu'" in ev[0].message
    assert "island merged from 'npu' into 'numpy'" in {p.node: p.reason for p in sess.placement_report}["c"]
    np.testing.assert_allclose(sess.run(X)["y"], reference(m, X)[0], rtol=1e-6)
    assert sess.stats()["host_device_copies"] == 2  # x up, a down (was 4 with the island)


def test_pinned_island_and_host_memory_islands_stay():
    npu = make_fake_backend("npu", ["Relu", "Neg"], priority=100, device_memory=True)
    reg = make_registry(fake_plugin(npu))
    sess = Session(_island_model(), ScheduleConfig(backends=["npu"], pins={"c": "npu"}), registry=reg)
    assert sess.placement["c"] == "npu" and not [e for e in sess.events if e.kind == "island_merged"]
    host = make_fake_backend("hostnpu", ["Relu", "Neg"], priority=100)  # host memory: nothing to save
    reg = make_registry(fake_plugin(host))
    sess = Session(_island_model(), ScheduleConfig(backends=["hostnpu"]), registry=reg)
    assert sess.placement["c"] == "hostnpu"


def test_if_node_bodies_stay_with_their_node():
    # the If node's branches read "a" (outer scope), produced on another backend
    then_g = helper.make_graph([helper.make_node("Neg", ["a"], ["t"], name="then_neg")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Abs", ["a"], ["e"], name="else_abs")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    npu = make_fake_backend("npu", ["Relu"], priority=100, device_memory=True)
    reg = make_registry(fake_plugin(npu))
    sess = Session(m, ScheduleConfig(backends=["npu"], optimization_level="none"), registry=reg)
    assert set(sess.placement) == {"relu", "sum", "gt", "if"}  # body nodes are not placed separately
    part_of = {p.node: p.partition for p in sess.placement_report}
    if_part = next(p for p in sess.partitions if p.index == part_of["if"])
    assert "a" in if_part.inputs  # the outer-scope read crosses the boundary
    relu_part = next(p for p in sess.partitions if p.index == part_of["relu"])
    assert relu_part.backend == "npu" and "a" in relu_part.outputs and relu_part.index < if_part.index
    for x in (X["x"], -np.abs(X["x"]) - 1):
        np.testing.assert_allclose(sess.run({"x": x})["y"], reference(m, {"x": x})[0])


# --------------------------------------------------- overlapped execution
def _two_branch_model():
    nodes = [helper.make_node("Relu", ["x"], ["a1"], name="dev1"),
             helper.make_node("Neg", ["a1"], ["a2"], name="dev2"),
             helper.make_node("Sin", ["x"], ["b1"], name="host1"),
             helper.make_node("Cos", ["b1"], ["b2"], name="host2"),
             helper.make_node("Add", ["a2", "b2"], ["y"], name="join")]
    return model(nodes)


def test_independent_partitions_on_different_devices_overlap():
    dev = timed_backend("dev", ["Relu", "Neg", "Add"], delay=0.05, device_memory=True, device_type="npu",
                        priority=100)
    host = timed_backend("host", ["Sin", "Cos"], delay=0.05)
    reg = make_registry(fake_plugin(dev, host))
    m = _two_branch_model()
    sess = Session(m, ScheduleConfig(backends=["dev", "host"], backup=None), registry=reg)
    assert [p.backend for p in sess.partitions] == ["dev", "host", "dev"]
    assert sess.executor.overlap
    d, h = reg.backend("dev").backend, reg.backend("host").backend
    got = sess.run(X)["y"]
    np.testing.assert_allclose(got, reference(m, X)[0], rtol=1e-6)
    (_, d_start, d_end), (_, h_start, h_end) = d.log[0], h.log[0]
    assert h_start < d_end and d_start < h_end  # the device branch ran while the host branch ran
    assert d.queue._threads and threading.current_thread().name == "MainThread"
    # copies as in a sequential run: x up, b2 up, y down (a2 stays on the device)
    assert (d.to_device_calls, d.to_host_calls) == (2, 1) and sess.stats()["host_device_copies"] == 3
    seq = Session(m, ScheduleConfig(backends=["numpy"]), registry=reg).run(X)["y"]
    np.testing.assert_array_equal(got, seq)


def test_overlapped_run_reports_partition_errors_and_stays_usable():
    dev = timed_backend("dev", ["Relu", "Neg", "Add"], delay=0.0, device_memory=True, priority=100)
    host = timed_backend("host", ["Sin", "Cos"], delay=0.0)
    reg = make_registry(fake_plugin(dev, host))
    sess = Session(_two_branch_model(), ScheduleConfig(backends=["dev", "host"], backup=None), registry=reg)
    from nnrt_core.errors import NnrtError

    with pytest.raises(NnrtError):
        sess.run({"x": np.zeros((2, 3), np.float32)[:, :2]})
    np.testing.assert_allclose(sess.run(X)["y"], reference(_two_branch_model(), X)[0], rtol=1e-6)


# ------------------------------------------------------------- bad input
def test_bad_pins_and_impossible_placement_list_the_choices():
    npu = make_fake_backend("npu", ["Relu"], priority=100)
    reg = registry(npu)
    m = chain("Relu", "Neg")
    with pytest.raises(ConfigError, match=r"pin names unknown node 'relu'; did you mean relu0\?"):
        Session(m, ScheduleConfig(backends=["npu"], pins={"relu": "npu"}), registry=reg)
    with pytest.raises(ConfigError, match=r"backend is not selected; selected: npu, numpy"):
        Session(m, ScheduleConfig(backends=["npu"], pins={"relu0": "onnxruntime"}), registry=reg)
    with pytest.raises(ConfigError, match=r"unknown backend 'tpu'; installed backends: npu, numpy"):
        Session(m, ScheduleConfig(backends=["tpu"], scheduler="cost"), registry=reg)
    with pytest.raises(UnsupportedNodeError, match=r"neg1 \(Neg, opset 17\): npu: npu only runs \['Relu'\]"):
        Session(m, ScheduleConfig(backends=["npu"], backup=None, scheduler="cost"), registry=reg)
