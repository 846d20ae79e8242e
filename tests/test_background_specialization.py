"""Background specialization: once ``max_specializations`` plans are held, a
signature seen again is planned on a worker thread while its runs take the
dynamic plan (nnrt_core/compiler/background.py), and the plan is swapped in
when built.  Swaps are made deterministic with ``Session.wait_for_specializations``
and by holding a run "in flight" (``nnrt_core.runtime.activity``), which pauses
the worker."""
from __future__ import annotations

import threading
import time

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ConfigError, ScheduleConfig, Session
from nnrt_core.compiler import specialize
from nnrt_core.runtime import activity

NPU = dict(precision="fp16", backends=["npu_emu", "onnxruntime"], backup="numpy", max_specializations=2)
RNG = np.random.default_rng(11)


def _model():
    """MatMul -> Add -> Relu over tokens of a free length: [1, L, 16] -> [1, L, 8]."""
    w = h.make_tensor("w", T.FLOAT, [16, 8], RNG.standard_normal(128).astype(np.float32).tolist())
    b = h.make_tensor("b", T.FLOAT, [8], RNG.standard_normal(8).astype(np.float32).tolist())
    g = h.make_graph(
        [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"), h.make_node("Add", ["m", "b"], ["a"], name="add"),
         h.make_node("Relu", ["a"], ["y"], name="relu")],
        "tokens", [h.make_tensor_value_info("x", T.FLOAT, [1, "L", 16])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, "L", 8])], [w, b])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _x(n):
    return RNG.random((1, n, 16), dtype=np.float32)


def _full(m=None, **cfg):
    """A session whose two plans (lengths 4 and 5) fill its cache."""
    sess = Session(m if m is not None else _model(), ScheduleConfig(**{**NPU, **cfg}))
    for n in (4, 5):
        sess.run({"x": _x(n)})
    assert len(sess.specializations) == 2 and not sess.specializations.pending()
    return sess


class _InFlight:
    """Hold one run "in flight" (as another thread's run would): the worker pauses."""

    def __enter__(self):
        activity.enter()

    def __exit__(self, *exc):
        activity.leave()


def _close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2 * float(np.abs(ref).max()))


def test_the_run_that_sees_a_length_again_takes_the_dynamic_plan_and_the_plan_swaps_in_later():
    m = _model()
    sess = _full(m)
    x = _x(9)
    first = sess.run({"x": x})["y"]
    second = sess.run({"x": x})["y"]  # seen again: queued, not built by this run
    assert sess.compiled_model is sess.generic_plan.model
    with _InFlight():  # while runs are in flight the worker does not finish the build
        assert sess.specializations.pending() == [((1, 9, 16),)]
        assert ((1, 9, 16),) not in sess.specializations.signatures()
    assert sess.wait_for_specializations(timeout=60)
    assert ((1, 9, 16),) in sess.specializations.signatures() and not sess.specializations.pending()
    third = sess.run({"x": x})["y"]
    assert sess.compiled_model is not sess.generic_plan.model and set(sess.placement.values()) == {"npu_emu"}
    (swapped,) = [e for e in sess.events if e.kind == "specialization_swapped"]
    assert "x=[1, 9, 16]" in swapped.message and "in the background" in swapped.message
    assert [e.kind for e in sess.events].count("specialization_evicted") == 1
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for got in (first, second, third):  # the dynamic plan (fp32 on ORT) and the fp16 NPU plan agree
        _close(got, ref)
    _close(first, third)
    np.testing.assert_array_equal(first, second)  # the same (dynamic) plan: the same bits


def test_the_worker_pauses_while_a_run_is_in_flight():
    sess = _full()
    x = _x(7)
    sess.run({"x": x})
    with _InFlight():
        sess.run({"x": x})  # queues the build; our run stays in flight afterwards
        time.sleep(0.5)
        assert sess.specializations.pending() == [((1, 7, 16),)]
        assert not sess.wait_for_specializations(timeout=0.2)
    assert sess.wait_for_specializations(timeout=60) and ((1, 7, 16),) in sess.specializations.signatures()
    assert activity.in_flight() == 0


def test_background_builds_are_bounded_and_a_signature_left_out_is_queued_at_a_later_sighting():
    sess = _full(max_specializations=3)
    sess.run({"x": _x(6)})  # three plans: the cache is full
    lengths = (7, 8, 9)
    with _InFlight():
        for n in lengths:
            for _ in range(2):
                sess.run({"x": _x(n)})
        assert len(sess.specializations.pending()) == specialize.MAX_BACKGROUND_BUILDS == 2
        assert ((1, 9, 16),) not in sess.specializations.pending()
    assert sess.wait_for_specializations(timeout=60)
    assert ((1, 9, 16),) not in sess.specializations.signatures()
    sess.run({"x": _x(9)})  # its next sighting (it is remembered as seen once) queues it
    assert sess.wait_for_specializations(timeout=60)
    assert sess.specializations.signatures()[-1] == ((1, 9, 16),)


def test_a_background_build_that_raises_is_an_event_and_its_runs_keep_the_dynamic_plan(monkeypatch):
    sess = _full()

    def broken(*args, **kwargs):
        raise RuntimeError("plugin bug")

    monkeypatch.setattr(specialize, "compile_model", broken)
    x = _x(11)
    for _ in range(2):
        sess.run({"x": x})
    assert sess.wait_for_specializations(timeout=60)
    (failed,) = [e for e in sess.events if e.kind == "specialization_failed"]
    assert "RuntimeError: plugin bug" in failed.message and "x=[1, 11, 16]" in failed.message
    sess.run({"x": x})
    assert sess.compiled_model is sess.generic_plan.model and not sess.specializations.pending()


def test_runs_from_threads_during_background_builds_agree_with_onnxruntime():
    m = _model()
    sess = _full(m)
    raw = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: _x(n) for n in (4, 5, 6, 7, 8)}
    refs = {n: raw.run(None, {"x": x})[0] for n, x in feeds.items()}
    errors: list[BaseException] = []

    def client(k: int) -> None:
        try:
            for i in range(12):
                n = (4, 5, 6, 7, 8)[(i + k) % 5]
                _close(sess.run({"x": feeds[n]})["y"], refs[n])
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sess.wait_for_specializations(timeout=60) and activity.in_flight() == 0
    assert len(sess.specializations) == 2


def test_a_run_that_raises_leaves_the_count_of_runs_balanced(monkeypatch):
    sess = _full()

    def boom(*args, **kwargs):
        raise RuntimeError("kernel bug")

    monkeypatch.setattr(sess.executor, "run", boom)
    with pytest.raises(RuntimeError, match="kernel bug"):
        sess.run({"x": _x(5)})
    assert activity.in_flight() == 0


def test_synchronous_mode_and_the_model_cache(tmp_path):
    sync = _full(specialize_in_background=False)
    for _ in range(2):
        sync.run({"x": _x(10)})
    assert sync.compiled_model is not sync.generic_plan.model  # the second run built it
    assert not sync.specializations.pending() and sync.wait_for_specializations(timeout=0)
    m = _model()
    cached = _full(m, cache_dir=str(tmp_path))
    before = len(list(tmp_path.glob("*.nnrtc")))
    for _ in range(2):
        cached.run({"x": _x(12)})
    assert cached.wait_for_specializations(timeout=60)
    assert len(list(tmp_path.glob("*.nnrtc"))) == before + 1  # the background build stored its entry
    again = _full(m, cache_dir=str(tmp_path))
    for _ in range(2):
        again.run({"x": _x(12)})
    assert again.wait_for_specializations(timeout=60)
    again.run({"x": _x(12)})
    assert again.compiled_model.cache_hit


def test_config_checks_the_flag():
    with pytest.raises(ConfigError, match="specialize_in_background"):
        ScheduleConfig(specialize_in_background="yes")
    assert "specialize_in_background" in ScheduleConfig().to_dict()


def test_a_session_whose_background_build_finished_is_freed_when_dropped():
    import gc
    import weakref

    sess = _full()
    for _ in range(2):
        sess.run({"x": _x(13)})
    assert sess.wait_for_specializations(timeout=60)
    ref = weakref.ref(sess)
    del sess
    gc.collect()
    assert ref() is None  # the build thread keeps no reference to a finished job's session
