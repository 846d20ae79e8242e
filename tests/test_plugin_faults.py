"""Plugins are data too: a table of plugin faults, each of which must either
fall back (with the reason visible and the right answer) or fail with a
clear :class:`NnrtError` naming the backend -- never a raw exception, never a
silent wrong answer."""
from __future__ import annotations

import re
import types
from importlib import metadata
from typing import Any, Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import builtin_entry_points, make_registry
from fakes import DeviceArray, FakeBackend, fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend import Capability
from nnrt_core.errors import ExecutionError, InputError, NnrtError
from nnrt_core.registry import BACKEND_GROUP, Registry

X = {"x": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)}
EXPECTED = np.abs(-np.maximum(X["x"], 0))  # Relu -> Neg -> Abs


def chain(shape: list[Any] = [2, 3]) -> onnx.ModelProto:  # noqa: B006 - never mutated
    nodes = [helper.make_node("Relu", ["x"], ["t0"], name="relu0"),
             helper.make_node("Neg", ["t0"], ["t1"], name="neg1"),
             helper.make_node("Abs", ["t1"], ["y"], name="abs2")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def on_bad(backend: type, **config: Any) -> Session:
    """A session of ``chain()`` that selects backend ``bad`` with the NumPy backup."""
    config.setdefault("pins", {"neg1": "bad"})  # no island merging moves it away
    return Session(chain(), ScheduleConfig(backends=["bad"], backup="numpy", **config),
                   registry=make_registry(fake_plugin(backend)))


# ---------------------------------------------------------------- run faults
def _values(f: Callable[[Any], Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A fault rewriting every value (the array inside a fake device tensor)."""
    def fault(outs: dict[str, Any]) -> dict[str, Any]:
        return {k: DeviceArray(f(v.data), v.owner) if isinstance(v, DeviceArray) else f(v) for k, v in outs.items()}
    return fault


def _replace(value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda outs: {k: value for k in outs}


#: (fault, what the error must say, whether it names the value)
OUTPUT_FAULTS: dict[str, tuple[Callable[[dict[str, Any]], Any], str, bool]] = {
    "returns None": (lambda outs: None, "returned None instead of a dict", False),
    "returns a list": (lambda outs: list(outs.values()), "returned a list of 1 item(s)", False),
    "returns a tuple": (lambda outs: tuple(outs.values()), "returned a tuple", False),
    "returns a string": (lambda outs: "done", "returned a str", False),
    "returns no outputs": (lambda outs: {}, "returned no value for output", True),
    "renames the output": (lambda outs: {k + "_": v for k, v in outs.items()}, "returned no value", True),
    "value is None": (_replace(None), "returned None for output", True),
    "value is a list": (_replace([1.0, 2.0]), "returned a list of 2 item(s) for output", True),
    "value is a float": (_replace(1.5), "returned a float for output", True),
    "value is a numpy scalar": (_replace(np.float32(1.5)), "for output", True),
    "wrong dtype (float64)": (_values(lambda v: v.astype(np.float64)), "returned dtype float64", True),
    "wrong dtype (int32)": (_values(lambda v: v.astype(np.int32)), "returned dtype int32", True),
    "wrong shape (transposed)": (_values(lambda v: np.ascontiguousarray(v.T)), "returned shape [3, 2]", True),
    "wrong rank": (_values(lambda v: v[None]), "returned shape [1, ", True),
    "flattened": (_values(lambda v: v.reshape(-1)), "returned shape [6]", True),
}

#: where the faulty backend runs: (ops it claims, fake device memory, the value it produces)
LAYOUTS = {
    "whole model, host": (["Relu", "Neg", "Abs"], False, "y"),
    "middle node, host": (["Neg"], False, "t1"),
    "middle node, device": (["Neg"], True, "t1"),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fault", OUTPUT_FAULTS)
def test_wrong_partition_outputs_are_execution_errors(fault, layout):
    ops, device, value = LAYOUTS[layout]
    fn, says, names_value = OUTPUT_FAULTS[fault]
    sess = on_bad(make_fake_backend("bad", ops, device_memory=device, output_fault=fn))
    assert "bad" in sess.placement.values()
    runs = {"run": lambda: sess.run(X), "run_async": lambda: sess.run_async(X).result(timeout=30),
            "profile": lambda: sess.profile(X)}  # profiling runs the partition's nodes one by one
    for how, run in runs.items():
        with pytest.raises(ExecutionError) as e:
            run()
        msg = str(e.value)
        assert "backend 'bad' partition 'p" in msg and says in msg, msg
        if names_value and how != "profile":
            assert repr(value) in msg, msg


HARMLESS = {
    "a read-only mapping": lambda outs: types.MappingProxyType(outs),
    "extra keys": lambda outs: {**outs, "scratch": np.zeros(3)},
}


@pytest.mark.parametrize("fault", HARMLESS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_harmless_output_variants_still_give_the_right_answer(fault, layout):
    ops, device, _ = LAYOUTS[layout]
    sess = on_bad(make_fake_backend("bad", ops, device_memory=device, output_fault=HARMLESS[fault]))
    np.testing.assert_array_equal(sess.run(X)["y"], EXPECTED)


def test_partition_raising_is_an_execution_error():
    def boom(outs):
        raise KeyError("scratch")

    sess = on_bad(make_fake_backend("bad", ["Neg"], output_fault=boom))
    with pytest.raises(ExecutionError, match="partition 'p1_bad' on backend 'bad' failed: KeyError"):
        sess.run(X)


def test_device_copies_and_run_async_faults_are_execution_errors():
    class BadCopy(make_fake_backend("bad", ["Neg"], device_memory=True)):
        def to_host(self, tensor):
            raise OSError("DMA timeout")

    with pytest.raises(ExecutionError, match="backend 'bad' failed to copy 't1' to the host: OSError: DMA"):
        on_bad(BadCopy).run(X)

    class HostGarbage(make_fake_backend("bad", ["Neg"], device_memory=True)):
        def to_host(self, tensor):
            return tensor.data.tolist()

    with pytest.raises(ExecutionError, match="copied 't1' to the host as a list"):
        on_bad(HostGarbage).run(X)

    class NoFuture(make_fake_backend("bad", ["Neg"], device_memory=True)):
        def _compile(self, graph, options):
            part = super()._compile(graph, options)
            part.run_async = lambda inputs: None
            return part

    with pytest.raises(ExecutionError, match="run_async returned None instead of a Future"):
        on_bad(NoFuture).run(X)


# -------------------------------------------------------------- build faults
def _capability(answer: Callable[[Any], Any]) -> type:
    class Bad(make_fake_backend("bad", ["Relu", "Neg", "Abs"])):
        def _capability(self, graph, options):
            return answer(graph)
    return Bad


def _compile(result: Callable[[], Any]) -> type:
    class Bad(make_fake_backend("bad", ["Relu", "Neg", "Abs"])):
        def _compile(self, graph, options):
            return result()
    return Bad


def _raise(exc: BaseException) -> Callable[..., Any]:
    def f(*_a: Any) -> Any:
        raise exc
    return f


class _Supports(make_fake_backend("bad", ["Relu", "Neg", "Abs"])):
    def _supports(self, node, options):
        raise ZeroDivisionError("bug")


#: (backend class, event kind, what the reason in the placement report says)
BUILD_FAULTS = {
    "_capability raises": (_capability(_raise(RuntimeError("sdk crashed"))), "plugin_fault", "sdk crashed"),
    "_capability returns None": (_capability(lambda g: None), "plugin_fault", "returned NoneType"),
    "_capability returns a list": (_capability(lambda g: [n.name for n in g.nodes]), "plugin_fault",
                                   "returned list"),
    "supported is a list": (_capability(lambda g: Capability("bad", [n.name for n in g.nodes])), "plugin_fault",
                            "supported=list"),
    "unknown node claimed": (_capability(lambda g: Capability("bad", {"ghost"})), "plugin_fault", "'ghost'"),
    "reason is not a string": (_capability(lambda g: Capability("bad", set(), {n.name: 7 for n in g.nodes})),
                               "plugin_fault", "not strings"),
    "_supports raises": (_Supports, "node_fallback", "ZeroDivisionError: bug"),
    "_compile returns None": (_compile(lambda: None), "compile_fallback", "returned NoneType"),
    "_compile returns a string": (_compile(lambda: "ok"), "compile_fallback", "returned str"),
    "_compile raises KeyError": (_compile(_raise(KeyError("w"))), "compile_fallback", "KeyError"),
}


@pytest.mark.parametrize("fault", BUILD_FAULTS)
def test_build_faults_fall_back_visibly(fault, caplog):
    cls, kind, says = BUILD_FAULTS[fault]
    sess = on_bad(cls, pins={})
    assert set(sess.placement.values()) == {"numpy"}
    assert any(e.kind == kind for e in sess.events), [e.kind for e in sess.events]
    report = {p.node: p for p in sess.placement_report}
    assert says in report["neg1"].rejected["bad"], report["neg1"].rejected
    assert says in caplog.text
    np.testing.assert_array_equal(sess.run(X)["y"], EXPECTED)


# ----------------------------------------------------------- registry faults
class _InitRaises(FakeBackend):
    name = "bad"

    def __init__(self) -> None:
        raise SystemExit(3)


#: (backend class, what the unavailability reason says)
REGISTRY_FAULTS = {
    "default_priority='high'": (make_fake_backend("bad", ["Neg"], default_priority="high"), "default_priority"),
    "default_priority=True": (make_fake_backend("bad", ["Neg"], default_priority=True), "default_priority"),
    "supported_options=None": (make_fake_backend("bad", ["Neg"], supported_options=None), "supported_options"),
    "supported_options={1}": (make_fake_backend("bad", ["Neg"], supported_options=frozenset({1})),
                              "supported_options"),
    "version=None": (make_fake_backend("bad", ["Neg"], version=None), "version"),
    "device_type=3": (make_fake_backend("bad", ["Neg"], device_type=3), "device_type"),
    "host_memory='yes'": (make_fake_backend("bad", ["Neg"], host_memory="yes"), "host_memory"),
    "_availability returns 42": (make_fake_backend("bad", ["Neg"], _availability=lambda self: 42), "42"),
    "__init__ exits": (_InitRaises, "SystemExit"),
}


@pytest.mark.parametrize("fault", REGISTRY_FAULTS)
def test_registry_faults_disable_only_that_backend(fault, caplog):
    cls, says = REGISTRY_FAULTS[fault]
    good = make_fake_backend("good", ["Neg"], priority=200, emulated=False)  # a real engine: auto takes it
    reg = make_registry(fake_plugin(cls), fake_plugin(good))
    rec = reg.backend("bad")
    assert not rec.available and says in rec.reason, rec.reason
    assert says in caplog.text
    assert {r.name for r in reg.available_backends()} >= {"good", "numpy"}
    auto = Session(chain(), ScheduleConfig(backends="auto"), registry=reg)  # other sessions are unaffected
    assert auto.placement["neg1"] == "good"
    np.testing.assert_array_equal(auto.run(X)["y"], EXPECTED)
    named = Session(chain(), ScheduleConfig(backends=["bad"], backup="numpy"), registry=reg)
    assert any(e.kind == "backend_unavailable" and says in e.message for e in named.events)
    np.testing.assert_array_equal(named.run(X)["y"], EXPECTED)


@pytest.mark.parametrize("body", ["raise SystemExit(2)", "raise RuntimeError('no sdk')", "import nnrt_no_such_sdk"])
def test_plugin_import_raising_anything_is_listed_not_fatal(body, tmp_path, monkeypatch):
    name = f"nnrt_test_plugin_import_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(body + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = metadata.EntryPoint(name="broken", value=name, group=BACKEND_GROUP)
    reg = Registry(entry_points=lambda g: builtin_entry_points(g) + ([ep] if g == BACKEND_GROUP else []), env={})
    rec = next(p for p in reg.plugin_records if p.name == "broken")
    assert rec.status == "failed" and "import failed" in rec.reason
    assert reg.backend("numpy").available


def test_hook_exiting_marks_plugin_failed():
    class Exits:
        from nnrt_core.hookspec import hookimpl

        @hookimpl
        def nnrt_backends(self):
            raise SystemExit(1)

    reg = make_registry(Exits(), fake_plugin(make_fake_backend("good", ["Neg"])))
    rec = next(p for p in reg.plugin_records if p.name == "test0")
    assert rec.status == "failed" and "SystemExit" in rec.reason
    assert reg.backend("good").available


class _SchedulerPlugin:
    def __init__(self, cls: type) -> None:
        self.cls = cls

    from nnrt_core.hookspec import hookimpl

    @hookimpl
    def nnrt_schedulers(self):
        return [self.cls]


def _scheduler(**methods: Any) -> type:
    from nnrt_core.placement import Scheduler

    return type("Broken", (Scheduler,), {"name": "broken", "description": "",
                                         "_place": lambda self, ctx: {n.name: "numpy" for n in ctx.graph.nodes},
                                         **methods})


@pytest.mark.parametrize("cls, error, says", [
    (_scheduler(__init__=_raise(SystemExit(1))), "PluginError", "scheduler 'broken' failed to initialize: SystemExit"),
    (type("NotAScheduler", (), {"name": "broken"}), "PluginError", "not a nnrt_core.placement.Scheduler"),
    (_scheduler(_place=_raise(IndexError("oops"))), "PlacementError", "scheduler 'broken' failed: IndexError: oops"),
    (_scheduler(_place=lambda self, ctx: {"relu0": "numpy"}), "PlacementError", "left node"),
])
def test_scheduler_faults_are_clear_errors(cls, error, says):
    reg = make_registry(_SchedulerPlugin(cls))
    with pytest.raises(NnrtError) as e:
        Session(chain(), ScheduleConfig(scheduler="broken"), registry=reg)
    assert type(e.value).__name__ == error and says in str(e.value), str(e.value)
    np.testing.assert_array_equal(Session(chain(), registry=reg).run(X)["y"], EXPECTED)  # others unaffected


# -------------------------------------------------------------- cache faults
class _Serializable(make_fake_backend("bad", ["Relu", "Neg", "Abs"])):
    def load_compiled(self, blob, options):
        raise ValueError("blob from another SDK")


@pytest.mark.parametrize("serialize", [_raise(RuntimeError("disk SDK bug")), lambda: "not bytes"])
def test_serialize_faults_only_disable_the_cache(serialize, tmp_path):
    class Bad(make_fake_backend("bad", ["Relu", "Neg", "Abs"])):
        def _compile(self, graph, options):
            part = super()._compile(graph, options)
            part.serialize = serialize
            return part

    sess = on_bad(Bad, cache_dir=str(tmp_path))
    assert any(e.kind == "cache_disabled" and "'bad'" in e.message for e in sess.events)
    np.testing.assert_array_equal(sess.run(X)["y"], EXPECTED)


def test_load_compiled_fault_rebuilds_and_fingerprint_fault_skips_the_cache(tmp_path):
    class Bad(_Serializable):
        def _compile(self, graph, options):
            part = super()._compile(graph, options)
            part.serialize = lambda: b"blob"
            return part

    first = on_bad(Bad, cache_dir=str(tmp_path))
    assert first.cache_path is not None and not first.cache_hit
    again = on_bad(Bad, cache_dir=str(tmp_path))  # the entry exists, loading it fails: rebuilt
    assert not again.cache_hit
    np.testing.assert_array_equal(again.run(X)["y"], EXPECTED)

    class NoPrint(Bad):
        def cache_fingerprint(self):
            raise RuntimeError("no device")

    sess = on_bad(NoPrint, cache_dir=str(tmp_path))
    assert any(e.kind == "cache_disabled" and "cache_fingerprint" in e.message for e in sess.events)


def test_describe_raising_does_not_break_reports():
    class Bad(make_fake_backend("bad", ["Neg"])):
        def _compile(self, graph, options):
            part = super()._compile(graph, options)
            part.describe = _raise(RuntimeError("no stats"))
            return part

    sess = on_bad(Bad)
    details = next(p.details for p in sess.partitions if p.backend == "bad")
    assert "no stats" in details["error"]
    assert sess.stats()["partitions"] == 3


# ---------------------------------------------------------------- raw leaks
def test_non_string_feed_keys_are_input_errors():
    sess = Session(chain())
    with pytest.raises(InputError, match=r"feed keys must be input names \(str\), got \['0 \(int\)'\]"):
        sess.run({0: X["x"]})
    with pytest.raises(InputError, match="feed keys"):
        sess.run({"x": X["x"], ("x",): X["x"]})


def test_allocate_input_checks_the_size_before_allocating():
    # a budget above the declared size: the build's static size check (docs/runtime.md) lets it through
    huge = Session(chain([100000, 100000, 100000]), ScheduleConfig(max_tensor_bytes=2 ** 62))
    with pytest.raises(InputError, match=r"input 'x': a float32\[100000, 100000, 100000\] tensor needs "
                                         r"4,000,000,000,000,000 bytes, more than this machine's memory"):
        huge.allocate_input("x")
    dynamic = Session(chain(["n", 3]))
    with pytest.raises(InputError, match="more than this machine's memory"):
        dynamic.allocate_input("x", (10**15, 3))
    with pytest.raises(InputError, match="shape must be a sequence of ints"):
        dynamic.allocate_input("x", ("a", 3))
    assert dynamic.allocate_input("x", (4, 3)).shape == (4, 3)


def test_cli_compile_to_a_missing_directory_is_one_line(tmp_path, capsys):
    from nnrt_core.tools.cli import main

    path = tmp_path / "m.onnx"
    onnx.save(chain(), str(path))
    assert main(["compile", str(path), "-o", str(tmp_path / "missing_dir" / "x.nnrt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nnrt: error: cannot write") and "does not exist" in err
    assert err.count("\n") == 1 and "Traceback" not in err



def test_output_check_rules_for_sequences_optionals_unknown_types_and_device_tensors():
    from nnrt_core.ir import DataType, OptionalType, SequenceType, TensorType
    from nnrt_core.runtime.output_check import OutputCheck

    f32 = TensorType(DataType.FLOAT, (2, "n"))
    types = {"s": SequenceType(f32), "o": OptionalType(f32), "t": f32}
    check = OutputCheck("b", "p0_b", ["s", "o", "t", "u"], types)  # "u": type unknown (a loaded intermediate)
    ok = {"s": [np.zeros((2, 1), np.float32)], "o": None, "t": np.zeros((2, 5), np.float32),
          "u": np.zeros(3, np.int64)}
    assert check(ok) is ok
    for bad, says in [({**ok, "s": np.zeros(2)}, "for sequence output 's'; expected a list"),
                      ({**ok, "t": np.zeros((3, 5), np.float32)}, "returned shape [3, 5] for output 't'"),
                      ({**ok, "u": [1, 2]}, "returned a list of 2 item(s) for output 'u'; expected a numpy array")]:
        with pytest.raises(ExecutionError, match=re.escape(says)):
            check(bad)
    device = OutputCheck("npu", "p1_npu", ["t"], {"t": f32}, host_memory=False)
    handle = object()  # an opaque device handle: accepted, nothing to compare
    assert device({"t": handle})["t"] is handle
    with pytest.raises(ExecutionError, match="returned None for output 't'; expected a device tensor"):
        device({"t": None})
    with pytest.raises(ExecutionError, match=r"returned dtype float64 for output 't'"):
        device({"t": DeviceArray(np.zeros((2, 1)), None)})


@pytest.mark.parametrize("estimate", [_raise(RuntimeError("no model")), lambda: "fast", lambda: -1.0])
def test_optional_partition_hooks_failing_only_lose_their_information(estimate, caplog):
    class Bad(make_fake_backend("bad", ["Neg"])):
        def _compile(self, graph, options):
            part = super()._compile(graph, options)
            part.estimated_seconds = estimate
            part.prepare_thread_budget = _raise(OSError("no thread pool"))
            return part

    sess = on_bad(Bad)
    sess.prepare_thread_budgets([1, 2])  # logged, not raised
    assert "prepare_thread_budget(1) failed: OSError: no thread pool" in caplog.text
    trace = sess.profile(X)  # the projection and simulated time skip the broken estimate
    np.testing.assert_array_equal(trace.outputs["y"], EXPECTED)
    assert "estimated_seconds()" in caplog.text
    np.testing.assert_array_equal(sess.run(X)["y"], EXPECTED)


def test_prepare_build_gets_each_candidates_options_once_per_build_and_a_failure_is_logged(caplog):
    seen: list[tuple[str, dict]] = []

    class Preparing(make_fake_backend("bad", ["Neg"])):
        def prepare_build(self, options):
            seen.append((self.name, options))

    sess = on_bad(Preparing, backend_options={"bad": {"knob": 3}})
    assert seen == [("bad", {"knob": 3})]  # the NumPy backup's own hook is not the fake's
    np.testing.assert_array_equal(sess.run(X)["y"], EXPECTED)

    class Failing(make_fake_backend("bad", ["Neg"])):
        prepare_build = _raise(MemoryError("no heap"))

    sess = on_bad(Failing)  # logged, not raised: preparing only makes the build cheaper
    assert "backend bad: prepare_build() failed: MemoryError: no heap" in caplog.text
    np.testing.assert_array_equal(sess.run(X)["y"], EXPECTED)
