"""Shape specialization: a session on a model with free input dimensions plans
again for each new input signature (MNN's resize), so the NPU, which takes
static shapes only, takes part without any config."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ConfigError, InputError, ScheduleConfig, Session
from nnrt_core.compiler import specialize
from nnrt_core.errors import CompileError

NPU = dict(precision="fp16", backends=["npu_emu", "onnxruntime"], backup="numpy")
RNG = np.random.default_rng(7)


def _model():
    """Conv -> Relu -> GlobalAveragePool over an image of free batch, height and width (weights of
    6.9 KB: large enough to be shared between sessions and plans)."""
    w = h.make_tensor("w", T.FLOAT, [64, 3, 3, 3], RNG.standard_normal(64 * 27).astype(np.float32).tolist())
    g = h.make_graph(
        [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         h.make_node("Relu", ["c"], ["r"], name="relu"),
         h.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")],
        "dyn", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, "H", "W"])],
        [h.make_tensor_value_info("y", T.FLOAT, ["N", 64, 1, 1])], [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _x(*shape):
    return RNG.random(shape, dtype=np.float32)


def _ort(m, x):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_first_run_plans_for_its_shapes_like_given_input_shapes():
    m, x = _model(), _x(2, 3, 8, 10)
    sess = Session(m, ScheduleConfig(**NPU))
    assert set(sess.placement.values()) == {"onnxruntime"}  # the dynamic plan: the NPU declines
    out = sess.run({"x": x})["y"]
    fixed = Session(m, ScheduleConfig(**NPU, input_shapes={"x": x.shape}))
    assert sess.placement == fixed.placement and set(fixed.placement.values()) == {"npu_emu"}
    np.testing.assert_array_equal(out, fixed.run({"x": x})["y"])
    ref = _ort(m, x)
    np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())
    kinds = [e.kind for e in sess.events]
    assert kinds.count("specialized") == 1
    assert sess.generic_plan.model is not sess.compiled_model
    assert sess.stats()["planned_peak_bytes"] is not None  # static shapes: the memory plan is known


def test_seen_signature_reuses_its_plan_and_new_ones_switch():
    sess = Session(_model(), ScheduleConfig(**NPU))
    a, b = _x(1, 3, 8, 8), _x(1, 3, 6, 12)
    sess.run({"x": a})
    plan_a = sess.compiled_model
    sess.run({"x": a})
    assert sess.compiled_model is plan_a and len(sess.specializations) == 1
    sess.run({"x": b})
    assert sess.compiled_model is not plan_a and len(sess.specializations) == 2
    assert sess.partitions[0].inputs == ("x",)
    sess.run({"x": a})
    assert sess.compiled_model is plan_a  # the latest run's signature is the one described
    assert [e.kind for e in sess.events].count("specialized") == 2


def test_cache_of_plans_is_bounded_and_evicts_visibly():
    sess = Session(_model(), ScheduleConfig(**NPU, max_specializations=2))
    for hw in (4, 5, 6, 6, 4, 4):  # full: 6 is planned at its second run, 4 again at its second
        sess.run({"x": _x(1, 3, hw, hw)})
        assert sess.wait_for_specializations(timeout=60)  # the background build swapped in
    assert len(sess.specializations) == 2
    assert sess.specializations.signatures() == [((1, 3, 6, 6),), ((1, 3, 4, 4),)]
    evicted = [e for e in sess.events if e.kind == "specialization_evicted"]
    assert len(evicted) == 2 and "x=[1, 3, 4, 4]" in evicted[0].message


@pytest.mark.parametrize("background", [False, True])
def test_a_full_cache_plans_a_new_signature_on_its_second_run_only(background):
    m = _model()
    sess = Session(m, ScheduleConfig(**NPU, max_specializations=2, specialize_in_background=background))
    for hw in (4, 5):
        sess.run({"x": _x(1, 3, hw, hw)})
    x = _x(1, 3, 7, 7)
    once = sess.run({"x": x})["y"]  # seen once, cache full: the dynamic plan runs it, nothing is built
    assert sess.compiled_model is sess.generic_plan.model and len(sess.specializations) == 2
    assert not [e for e in sess.events if e.kind == "specialization_evicted"]
    (deferred,) = [e for e in sess.events if e.kind == "specialization_deferred"]
    assert "when it is seen again" in deferred.message
    assert ("in the background" in deferred.message) == background
    twice = sess.run({"x": x})["y"]  # seen again: planned (evicting the least recently used)
    if background:  # this run took the dynamic plan; the plan is built on the worker thread
        assert sess.compiled_model is sess.generic_plan.model
        assert sess.wait_for_specializations(timeout=60) and not sess.specializations.pending()
        assert [e.kind for e in sess.events].count("specialization_swapped") == 1
        twice = sess.run({"x": x})["y"]
    assert sess.compiled_model is not sess.generic_plan.model and ((1, 3, 7, 7),) in sess.specializations.signatures()
    assert set(sess.placement.values()) == {"npu_emu"}
    ref = _ort(m, x)
    for got in (once, twice):
        np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())
    np.testing.assert_allclose(once, twice, rtol=2e-2, atol=2e-2 * np.abs(ref).max())  # dynamic vs specialized
    sess.run({"x": _x(1, 3, 9, 9)})
    assert len([e for e in sess.events if e.kind == "specialization_deferred"]) == 1  # one event, not one per run


def test_reshape_plans_ahead_and_checks_shapes():
    sess = Session(_model(), ScheduleConfig(**NPU))
    sess.reshape({"x": [1, 3, 16, 16]})
    assert set(sess.placement.values()) == {"npu_emu"} and len(sess.specializations) == 1
    sess.run({"x": _x(1, 3, 16, 16)})
    assert len(sess.specializations) == 1
    with pytest.raises(InputError, match="cannot plan for"):
        sess.reshape({"x": [1, 4, 16, 16]})  # contradicts the static channel dimension
    with pytest.raises(InputError, match="unknown"):
        sess.reshape({"x": [1, 3, 4, 4], "z": [1]})
    with pytest.raises(InputError, match="dimension 1 to be 3"):
        sess.run({"x": _x(1, 2, 4, 4)})  # the usual feed error, before any planning


def test_modes_never_auto_and_always():
    m, x = _model(), _x(1, 3, 5, 5)
    never = Session(m, ScheduleConfig(**NPU, specialize_shapes="never"))
    never.run({"x": x})
    assert never.specializations is None and set(never.placement.values()) == {"onnxruntime"}
    with pytest.raises(ConfigError, match="reshape needs"):
        never.reshape({"x": [1, 3, 5, 5]})
    numpy_only = Session(m, ScheduleConfig(backends=["numpy"]))  # no backend needs static shapes
    assert numpy_only.specializations is None
    always = Session(m, ScheduleConfig(backends=["numpy"], specialize_shapes="always"))
    always.run({"x": x})
    assert len(always.specializations) == 1
    with pytest.raises(ConfigError, match="specialize_shapes must be one of"):
        ScheduleConfig(specialize_shapes="sometimes")
    with pytest.raises(ConfigError, match="max_specializations"):
        ScheduleConfig(max_specializations=0)


def test_a_signature_that_cannot_be_planned_falls_back_visibly(monkeypatch):
    m, x = _model(), _x(1, 3, 7, 7)
    sess = Session(m, ScheduleConfig(**NPU))

    def broken(*args, **kwargs):
        raise CompileError("device rejects this shape")

    monkeypatch.setattr(specialize, "compile_model", broken)
    out = sess.run({"x": x})["y"]
    np.testing.assert_allclose(out, _ort(m, x), rtol=1e-5, atol=1e-6)  # the dynamic plan ran it
    assert sess.compiled_model is sess.generic_plan.model
    failed = [e for e in sess.events if e.kind == "specialization_failed"]
    assert len(failed) == 1 and "device rejects this shape" in failed[0].message
    sess.run({"x": x})  # remembered: not tried again
    assert len([e for e in sess.events if e.kind == "specialization_failed"]) == 1


def test_specializations_share_weights_and_use_the_model_cache(tmp_path):
    m, x = _model(), _x(1, 3, 9, 9)
    cfg = ScheduleConfig(**NPU, cache_dir=str(tmp_path))
    first = Session(m, cfg)
    first.run({"x": x})
    assert first.weight_sharing.shared_bytes == first.weight_sharing.bytes > 0  # same weights as the generic plan
    second = Session(m, cfg)
    assert second.cache_hit  # the generic plan
    second.run({"x": x})
    assert second.cache_hit and set(second.placement.values()) == {"npu_emu"}  # the specialized one too


def test_a_compiled_file_with_free_dims_says_it_cannot_specialize(tmp_path):
    sess = Session(_model(), ScheduleConfig(backends=["onnxruntime"], backup="numpy", specialize_shapes="always"))
    path = sess.save(tmp_path / "m.nnrt")
    loaded = Session(path)
    assert loaded.specializations is None
    assert [e.kind for e in loaded.events] == ["specialization_unavailable"]
    x = _x(1, 3, 4, 4)
    np.testing.assert_array_equal(loaded.run({"x": x})["y"], sess.run({"x": x})["y"])


def test_cli_partition_plans_for_the_given_inputs(tmp_path, capsys):
    import json

    import onnx

    from nnrt_core.tools.cli import main

    path = tmp_path / "dyn.onnx"
    onnx.save(_model(), path)
    np.save(tmp_path / "x.npy", _x(1, 3, 12, 12))
    assert main(["partition", str(path), "--backends", "npu_emu,onnxruntime", "--precision", "fp16", "--json"]) == 0
    dynamic = json.loads(capsys.readouterr().out)
    assert {p["backend"] for p in dynamic["partitions"]} == {"onnxruntime"}
    assert main(["partition", str(path), "--backends", "npu_emu,onnxruntime", "--precision", "fp16", "--input",
                 f"x={tmp_path / 'x.npy'}", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert {p["backend"] for p in planned["partitions"]} == {"npu_emu"}
    assert "specialized" in [e["kind"] for e in planned["events"]]


def test_evicted_and_deleted_plans_free_their_device_memory():
    import gc

    from nnrt_core import default_registry

    npu = default_registry().backend("npu_emu").backend

    def used() -> int:
        gc.collect()
        return sum(int(d.properties["memory_in_use"]) for d in npu.devices())

    base = used()
    sess = Session(_model(), ScheduleConfig(**NPU, max_specializations=1))
    sess.run({"x": _x(1, 3, 8, 8)})
    one_plan = used() - base
    assert one_plan > 0
    for _ in range(2):  # the cache is full: planned at its second run, evicting the first plan
        sess.run({"x": _x(1, 3, 9, 9)})
    assert sess.wait_for_specializations(timeout=60) and len(sess.specializations) == 1
    assert sess.specializations.signatures() == [((1, 3, 9, 9),)]
    assert used() - base < 1.5 * one_plan
    del sess
    assert used() == base


def test_cli_run_and_bench_plan_for_the_given_inputs_before_timing(tmp_path, capsys):
    import json

    import onnx

    from nnrt_core.tools.cli import main

    path = tmp_path / "dyn.onnx"
    onnx.save(_model(), path)
    np.save(tmp_path / "x.npy", _x(1, 3, 10, 10))
    for cmd in (["run"], ["bench", "--runs", "2", "--in-flight", "1"]):
        assert main([*cmd, str(path), "--backends", "npu_emu,onnxruntime", "--precision", "fp16", "--input", f"x={tmp_path / 'x.npy'}",
                     "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert {p["backend"] for p in data["partitions"]} == {"npu_emu"}, cmd
