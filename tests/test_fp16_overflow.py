"""fp16 overflow is never silent: the emulated NPU's saturating stores raise
its float-status flag, and ``ScheduleConfig.on_overflow`` turns it into a
visible event ("warn"), an error naming the node ("raise"), or a move of the
partition to the backup with the fp32-correct result ("fallback")."""
from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from conftest import make_registry
from fakes import DeviceArray, fake_plugin, make_fake_backend
from nnrt_core import ConfigError, ScheduleConfig, Session
from nnrt_core.errors import ExecutionError, NumericOverflowError
from nnrt_npu_emu.hostfuse import RELU_LO
from nnrt_npu_emu.numerics import FP16_MAX, fp16_unsafe_value, store_fp16

NPU = dict(precision="fp16", backends=["npu_emu"], backup="numpy")
RNG = np.random.default_rng(3)


def rms_model(shape: Any = (4, 64)) -> Any:
    """RMS of each row: x*x -> ReduceMean -> Sqrt (T5's RMSNorm statistic); x ~ 300 overflows fp16 in x*x."""
    g = h.make_graph([h.make_node("Mul", ["x", "x"], ["sq"], name="square"),
                      h.make_node("ReduceMean", ["sq"], ["m"], name="mean", axes=[1], keepdims=1),
                      h.make_node("Sqrt", ["m"], ["y"], name="root")],
                     "rms", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, [shape[0], 1])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def rms(x: np.ndarray) -> np.ndarray:
    return np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True))


BIG = RNG.normal(0, 300, (4, 64)).astype(np.float32)  # x*x reaches ~1e6
SMALL = RNG.normal(0, 3, (4, 64)).astype(np.float32)


def rel(y: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(y - ref).max() / np.abs(ref).max())


# ------------------------------------------------------------ the store flag
def test_store_flags_values_beyond_fp16_and_rounds_like_before():
    x = np.array([1.0, -3.5, 40000.0, FP16_MAX, -FP16_MAX, 0.0], np.float32)
    out = np.empty_like(x)
    assert store_fp16(out, None, src=x) is None  # 2**15..65504 fits: checked exactly, not flagged
    np.testing.assert_array_equal(out, x.astype(np.float16).astype(np.float32))
    for bad in (65505.0, 1e6, -7e5, np.inf, -np.inf):
        y = np.array([1.0, bad, 2.0], np.float32)
        assert store_fp16(y.copy()) == bad
    assert np.isnan(store_fp16(np.array([1.0, np.nan], np.float32)))
    big = RNG.normal(0, 1e5, 5000).astype(np.float32)  # the rounding with the exponents taken before the clamp
    got = big.copy()
    assert store_fp16(got) is not None
    np.testing.assert_array_equal(got, np.clip(big, -FP16_MAX, FP16_MAX).astype(np.float16).astype(np.float32))


def test_a_fused_clamp_that_bounds_the_value_is_no_overflow():
    relu6 = (RELU_LO, np.float32(6.0))
    assert store_fp16(np.array([1e6, -1e6, 3.0], np.float32), None, *relu6) is None
    assert store_fp16(np.array([-1e6, 3.0], np.float32), None, RELU_LO) is None  # Relu zeroes it
    assert store_fp16(np.array([1e6, 3.0], np.float32), None, RELU_LO) == 1e6
    hard = (np.float32(-1.0), np.float32(FP16_MAX))  # a narrowed low side only
    y = np.array([-1e6, 7e4, 2.5], np.float32)
    assert store_fp16(y, None, *hard) == np.float32(7e4)
    np.testing.assert_array_equal(y, [-1.0, FP16_MAX, 2.5])


# ---------------------------------------------------------------- policies
def test_warn_returns_the_saturated_result_with_one_event_naming_the_node(caplog):
    sess = Session(rms_model(), ScheduleConfig(**NPU, on_overflow="warn"))
    with caplog.at_level(logging.WARNING, logger="nnrt.session"):
        y = sess.run({"x": BIG})["y"]
        sess.run({"x": BIG})
    assert rel(y, rms(BIG)) > 0.3  # saturated at 65504: what the chip computes
    events = [e for e in sess.events if e.kind == "numeric_overflow"]
    assert len(events) == 1 and events[0].nodes == ["square"] and "square" in events[0].message
    assert any("fp16 overflow" in r.getMessage() for r in caplog.records)
    assert set(sess.placement.values()) == {"npu_emu"}
    assert sess.executor.overflow.counts == {"p0_npu_emu": 2}


def test_raise_names_partition_and_node():
    sess = Session(rms_model(), ScheduleConfig(**NPU, on_overflow="raise"))
    with pytest.raises(ExecutionError, match=r"p0_npu_emu.*node 'square'.*6\.\d*e\+05|node 'square'"):
        sess.run({"x": BIG})
    np.testing.assert_allclose(sess.run({"x": SMALL})["y"], rms(SMALL), rtol=2e-2)  # in range: fine


def test_fallback_moves_the_partition_to_the_backup_and_keeps_it_there(caplog):
    sess = Session(rms_model(), ScheduleConfig(**NPU))  # the default policy
    assert sess.config.on_overflow == "fallback"
    with caplog.at_level(logging.WARNING, logger="nnrt.session"):
        y = sess.run({"x": BIG})["y"]
    np.testing.assert_allclose(y, rms(BIG), rtol=1e-5)  # fp32, on the backup
    assert sess.placement == {"square": "numpy", "mean": "numpy", "root": "numpy"}
    report = {p.node: p for p in sess.placement_report}
    assert "fp16 overflow on npu_emu" in report["square"].reason and "square" in report["mean"].reason
    assert report["square"].rejected["npu_emu"] == "fp16 overflow at run time"
    events = [e for e in sess.events if e.kind == "overflow_fallback"]
    assert len(events) == 1 and set(events[0].nodes) == {"square", "mean", "root"}
    assert "node 'square'" in events[0].message and "moved to backup 'numpy'" in events[0].message
    assert any("moved to backup" in r.getMessage() for r in caplog.records)
    plan = sess.compiled_model
    np.testing.assert_allclose(sess.run({"x": BIG})["y"], rms(BIG), rtol=1e-5)
    assert sess.compiled_model is plan and len([e for e in sess.events if e.kind == "overflow_fallback"]) == 1


def test_a_model_that_fits_fp16_raises_nothing_and_stays_on_the_npu():
    for policy in ("fallback", "warn", "raise"):
        sess = Session(rms_model(), ScheduleConfig(**NPU, on_overflow=policy))
        np.testing.assert_allclose(sess.run({"x": SMALL})["y"], rms(SMALL), rtol=2e-2)
        assert set(sess.placement.values()) == {"npu_emu"}
        assert not [e for e in sess.events if "overflow" in e.kind]


def test_inf_fed_to_the_chip_is_not_its_overflow():
    x = SMALL.copy()
    x[0, 0] = np.inf  # non-finite input: the NaN/inf downstream is the input's
    sess = Session(rms_model(), ScheduleConfig(**NPU, on_overflow="raise"))
    sess.run({"x": x})
    assert not [e for e in sess.events if "overflow" in e.kind]


def test_fallback_without_a_backup_raises():
    sess = Session(rms_model(), ScheduleConfig(precision="fp16", backends=["npu_emu", "numpy"], backup=None))
    assert set(sess.placement.values()) == {"npu_emu"}
    with pytest.raises(ExecutionError, match="cannot fall back: the config has no backup"):
        sess.run({"x": BIG})


def test_fallback_of_a_specialized_plan_with_partitions_on_two_backends():
    """Free input dims: the run's specialized plan puts the square on the NPU; the fallback rebuilds that
    plan (its input shapes kept) and the overlapped device + host run repeats on it."""
    g = h.make_graph([h.make_node("Mul", ["x", "x"], ["sq"], name="square"),
                      h.make_node("Relu", ["sq"], ["r"], name="relu"),
                      h.make_node("ReduceMean", ["r"], ["m"], name="mean", axes=[1], keepdims=1),
                      h.make_node("Sqrt", ["m"], ["y"], name="root")],
                     "dyn", [h.make_tensor_value_info("x", T.FLOAT, ["N", 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 1])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    sess = Session(m, ScheduleConfig(precision="fp16", backends=["npu_emu", "onnxruntime"], backup="numpy",
                                     pins={"mean": "onnxruntime"}))
    np.testing.assert_allclose(sess.run({"x": SMALL})["y"], rms(SMALL), rtol=2e-2)
    assert sess.placement["square"] == "npu_emu" and sess.executor.overlap
    small_plan = sess.compiled_model
    y = sess.run({"x": BIG[:3]})["y"]
    np.testing.assert_allclose(y, rms(BIG[:3]), rtol=1e-5)
    assert sess.placement["square"] == "numpy" and sess.placement["mean"] == "onnxruntime"
    assert sess.compiled_model.config.input_shapes == {"x": (3, 64)}
    sess.run({"x": SMALL})  # the other signature's plan is untouched
    assert sess.compiled_model is small_plan and sess.placement["square"] == "npu_emu"


def test_on_overflow_is_validated():
    with pytest.raises(ConfigError, match="on_overflow"):
        ScheduleConfig(on_overflow="ignore")


# ------------------------------------------------- the core, with a fake fp16 backend
def _saturating(result: dict[str, Any]) -> dict[str, Any]:
    """A fake chip that saturates to fp16 and reports it like the emulator."""
    arrays = {k: v.data if isinstance(v, DeviceArray) else v for k, v in result.items()}
    big = [float(np.abs(v).max()) for v in arrays.values() if np.abs(v).max() > FP16_MAX]
    if not big:
        return result
    outs = {k: np.clip(v, -FP16_MAX, FP16_MAX) for k, v in arrays.items()}
    outs = {k: DeviceArray(outs[k], v.owner) if isinstance(v, DeviceArray) else outs[k] for k, v in result.items()}
    raise NumericOverflowError("fake fp16 store saturated", partition="p", backend="f16", node="square",
                               value=big[0], outputs=outs)


def square_model() -> Any:
    g = h.make_graph([h.make_node("Mul", ["x", "x"], ["y"], name="square")], "sq",
                     [h.make_tensor_value_info("x", T.FLOAT, [4, 64])], [h.make_tensor_value_info("y", T.FLOAT, [4, 64])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("device_memory", [False, True])
def test_core_policies_with_a_fake_fp16_backend(device_memory):
    """A fake chip running Mul only.  Host memory: the whole model x*x is one partition (the executor's
    single-partition fast path); device memory: the square of the RMS model on the chip, the rest on
    the backup (the overlapped device + host loop).  Both hand the overflow to the policy."""
    fake = make_fake_backend("f16", ["Mul"], device_memory=device_memory, output_fault=_saturating)
    model, want = (rms_model(), rms(BIG)) if device_memory else (square_model(), BIG.astype(np.float64) ** 2)

    def session(policy: str) -> Session:
        return Session(model, ScheduleConfig(backends=["f16"], backup="numpy", on_overflow=policy),
                       registry=make_registry(fake_plugin(fake)))

    warned = session("warn")
    assert warned.placement["square"] == "f16" and warned.executor.overlap == device_memory
    assert rel(warned.run({"x": BIG})["y"], want) > 0.3
    assert [e.kind for e in warned.events if "overflow" in e.kind] == ["numeric_overflow"]
    with pytest.raises(ExecutionError, match="node 'square'"):
        session("raise").run({"x": BIG})
    fell = session("fallback")
    np.testing.assert_allclose(fell.run({"x": BIG})["y"], want, rtol=1e-5)
    assert set(fell.placement.values()) == {"numpy"}
    assert [e.kind for e in fell.events if "overflow" in e.kind] == ["overflow_fallback"]


# ----------------------------------------------- dynamic quantization stays off fp16
FP32_CHIP = """
[[chip]]
name = "test-npu-f32"
vendor = "nnrt-test"
dtypes = ["fp32", "fp16"]
macs_per_cycle = {fp32 = 512, fp16 = 1024}
clock_mhz = 800
bandwidth_gbps = 25.6
onchip_kib = 2048
device_memory_mib = 64
launch_cycles = 400
max_rank = 4
"""


def dynamic_quant_model() -> Any:
    """x -> Mul -> Relu -> DynamicQuantizeLinear (the path into the quantizer), and x -> Sigmoid (not on it)."""
    g = h.make_graph([h.make_node("Mul", ["x", "two"], ["m"], name="scale"),
                      h.make_node("Relu", ["m"], ["r"], name="relu"),
                      h.make_node("DynamicQuantizeLinear", ["r"], ["q", "s", "z"], name="dql"),
                      h.make_node("Sigmoid", ["x"], ["y"], name="sigmoid")],
                     "dq", [h.make_tensor_value_info("x", T.FLOAT, [4, 64])],
                     [h.make_tensor_value_info("q", T.UINT8, [4, 64]), h.make_tensor_value_info("s", T.FLOAT, []),
                      h.make_tensor_value_info("z", T.UINT8, []), h.make_tensor_value_info("y", T.FLOAT, [4, 64])],
                     [h.make_tensor("two", T.FLOAT, [], [2.0])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_an_fp16_chip_declines_the_path_into_a_dynamic_quantizer(tmp_path):
    sess = Session(dynamic_quant_model(), ScheduleConfig(**NPU))
    report = {p.node: p for p in sess.placement_report}
    assert report["sigmoid"].backend == "npu_emu"
    for name in ("scale", "relu"):
        assert report[name].backend == "numpy"
        assert "feeds DynamicQuantizeLinear 'dql'" in report[name].rejected["npu_emu"]
    x = RNG.normal(0, 1, (4, 64)).astype(np.float32)
    ref = Session(dynamic_quant_model(), ScheduleConfig(backends=["numpy"])).run({"x": x})
    got = sess.run({"x": x})
    np.testing.assert_array_equal(got["q"], ref["q"])  # the quantizer saw fp32 values: the same int8 codes
    chip = tmp_path / "chip.toml"
    chip.write_text(FP32_CHIP)
    fp32 = Session(dynamic_quant_model(), ScheduleConfig(  # a chip with fp32, asked for fp32
        **{**NPU, "precision": "fp32"}, backend_options={"npu_emu": {"profile_file": str(chip), "profile": "test-npu-f32"}}))
    assert fp32.placement["relu"] == "npu_emu"  # an fp32 chip keeps them


def test_cli_flag_sets_the_policy():
    import argparse

    from nnrt_core.tools.cli_config import add_config_flags, config_from_args

    p = argparse.ArgumentParser()
    add_config_flags(p)
    assert config_from_args(p.parse_args(["--on-overflow", "raise"])).on_overflow == "raise"
    assert config_from_args(p.parse_args([])).on_overflow == "fallback"


def test_concurrent_runs_fall_back_once_and_all_get_the_fp32_result():
    sess = Session(rms_model(), ScheduleConfig(**NPU))
    feeds = [BIG * (1 + i / 10) for i in range(6)]
    futures = [sess.run_async({"x": x}) for x in feeds]
    for fut, x in zip(futures, feeds):
        np.testing.assert_allclose(fut.result()["y"], rms(x), rtol=1e-5)
    assert [e.kind for e in sess.events if "overflow" in e.kind] == ["overflow_fallback"]


def test_a_profiled_run_falls_back_too():
    sess = Session(rms_model(), ScheduleConfig(**NPU))
    trace = sess.profile({"x": BIG})
    np.testing.assert_allclose(trace.outputs["y"], rms(BIG), rtol=1e-5)
    assert set(sess.placement.values()) == {"numpy"}


# ---------------------------------------------------------- constants at compile
def const_model(scale: np.ndarray, mask: np.ndarray) -> Any:
    """``(x * scale + mask) -> Relu``: a weight and an additive mask, both constants."""
    g = h.make_graph([h.make_node("Mul", ["x", "scale"], ["s"], name="scale"),
                      h.make_node("Add", ["s", "mask"], ["m"], name="mask"),
                      h.make_node("Relu", ["m"], ["y"], name="relu")],
                     "consts", [h.make_tensor_value_info("x", T.FLOAT, [4, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4, 64])],
                     [h.make_tensor("scale", T.FLOAT, scale.shape, scale.ravel()),
                      h.make_tensor("mask", T.FLOAT, mask.shape, mask.ravel())])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_fp16_unsafe_value_tells_weights_from_mask_sentinels():
    f32 = np.finfo(np.float32)
    assert fp16_unsafe_value(np.array([1.0, -FP16_MAX, FP16_MAX], np.float32)) is None
    assert fp16_unsafe_value(np.array([0.0, f32.min, f32.max, -np.inf, np.inf, np.nan], np.float32)) is None
    assert fp16_unsafe_value(np.array([1.0, f32.min, 7e4], np.float32)) == np.float32(7e4)
    assert fp16_unsafe_value(np.array([-1e9, 0.0])) == -1e9  # float64 constants too
    assert fp16_unsafe_value(np.array([1e6], np.int64)) is None  # not a float: not stored in fp16
    assert fp16_unsafe_value(np.zeros(0, np.float32)) is None


def test_an_fp16_chip_declines_a_node_whose_constant_does_not_fit_fp16():
    x = SMALL / 10
    scale = np.full((1, 64), 2.0, np.float32)
    scale[0, 5] = 1e5  # a real weight beyond +-65504: clamping it would change the model silently
    mask = np.zeros((1, 64), np.float32)
    mask[0, :8] = np.finfo(np.float32).min  # "minus infinity" fill: saturating it keeps its meaning
    sess = Session(const_model(scale, mask), ScheduleConfig(**NPU))
    report = {p.node: p for p in sess.placement_report}
    assert report["scale"].backend == "numpy"
    why = report["scale"].rejected["npu_emu"]
    assert "constant 'scale'" in why and "1e+05" in why and "beyond fp16" in why
    assert report["mask"].backend == "npu_emu" and report["relu"].backend == "npu_emu"
    y = sess.run({"x": x})["y"]
    ref = np.maximum(x * scale + mask, 0)
    np.testing.assert_allclose(y, ref, rtol=2e-3, atol=1e-3)
    assert y[0, 5] == pytest.approx(ref[0, 5], rel=1e-3)  # the 1e5 weight's product, not 65504's


def test_the_emitter_refuses_to_clamp_a_weight_it_was_given():
    from nnrt_core.errors import CompileError
    from nnrt_npu_emu.lowering.emission import ProgramEmitter
    emitter = ProgramEmitter.__new__(ProgramEmitter)  # only the constant table is used
    emitter.const_ids, emitter.consts, emitter.const_size, emitter.fdt = {}, [], 0, "fp16"
    mask, weight = np.array([1.0, np.finfo(np.float32).min], np.float32), np.array([2e5], np.float32)
    op = emitter.add_const(mask, keep=False)  # (constants are keyed by id: keep them alive, as the graph does)
    assert op.dtype == "float16" and emitter.consts[0][0][1] == -FP16_MAX
    with pytest.raises(CompileError, match="2e\\+05, beyond fp16"):
        emitter.add_const(weight, keep=False)
    assert emitter.add_const(weight, keep=True).dtype == "float32"  # int8 steps keep their parameters in fp32


@pytest.mark.parametrize("backends", [["npu_emu"], ["numpy"]])
def test_a_dropped_session_frees_its_partitions_without_a_collection(backends):
    """The overflow guard on the plan's executor reaches the plan's ``replan``
    weakly: a bound method made a cycle that kept a dropped session's
    partitions (and the weights their kernels prepared) until a full collection."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        sess = Session(rms_model(), ScheduleConfig(backends=backends))  # the default "fallback" policy
        assert sess.config.on_overflow == "fallback"
        sess.run({"x": np.ones((4, 64), np.float32)})
        refs = [weakref.ref(st.compiled) for st in sess.executor.steps]
        del sess
        assert refs and [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()


def test_an_executor_outliving_its_session_cannot_fall_back_and_says_so():
    sess = Session(rms_model(), ScheduleConfig(**NPU))
    executor = sess.executor
    del sess
    with pytest.raises(ExecutionError, match="the session of this run is gone"):
        executor.overflow.replan([])


# ------------------------------------------------- additive masks at fp16's limit
def masked_softmax_model(mask: np.ndarray | None) -> Any:
    """``softmax(x @ w + mask)``: an additive attention mask, a constant (``mask`` given) or an input."""
    w = RNG.normal(0, 1, (8, 8)).astype(np.float32)
    inits = [h.make_tensor("w", T.FLOAT, [8, 8], w.ravel())]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [4, 8])]
    if mask is None:
        ins.append(h.make_tensor_value_info("mask", T.FLOAT, [1, 8]))
    else:
        inits.append(h.make_tensor("mask", T.FLOAT, [1, 8], mask.ravel()))
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["s"], name="scores"),
                      h.make_node("Add", ["s", "mask"], ["m"], name="mask"),
                      h.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1)],
                     "masked", ins, [h.make_tensor_value_info("y", T.FLOAT, [4, 8])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), w


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("where", ["constant", "input"])
def test_a_sum_saturating_only_on_a_mask_sentinel_is_no_overflow(where):
    """A mask of finfo.min (clipped to -65504 when stored in fp16) or of -65504
    itself: ``score - 65504`` saturates only where the mask says "minus infinity";
    the softmax then matches fp32 and the partition stays on the NPU."""
    mask = np.zeros((1, 8), np.float32)
    mask[0, 5:] = np.finfo(np.float32).min if where == "constant" else -FP16_MAX
    model, w = masked_softmax_model(mask if where == "constant" else None)
    x = RNG.normal(0, 3, (4, 8)).astype(np.float32)
    sess = Session(model, ScheduleConfig(**NPU, on_overflow="raise"))
    y = sess.run({"x": x} if where == "constant" else {"x": x, "mask": mask})["y"]
    np.testing.assert_allclose(y, _softmax(x @ w + mask), atol=5e-3)
    assert set(sess.placement.values()) == {"npu_emu"}
    assert not [e for e in sess.events if "overflow" in e.kind]


def test_a_sum_saturating_beside_a_sentinel_still_overflows():
    """The same mask, and scores beyond fp16 in an unmasked column: a real overflow, named."""
    mask = np.zeros((1, 8), np.float32)
    mask[0, 5:] = -FP16_MAX
    model, w = masked_softmax_model(None)
    x = RNG.normal(0, 3, (4, 8)).astype(np.float32)
    x[0] = 2e4 * np.sign(w[:, 0])  # column 0 of row 0 reaches ~1e5: unmasked
    sess = Session(model, ScheduleConfig(**NPU, on_overflow="raise"))
    with pytest.raises(ExecutionError, match="overflowed"):
        sess.run({"x": x, "mask": mask})


def test_sentinel_saturation_by_sign_and_operand():
    from nnrt_npu_emu.binding import sentinel_saturation
    out = np.array([-FP16_MAX, 3.0, FP16_MAX], np.float32)
    sentinel = np.array([-FP16_MAX, 0.0, 0.0], np.float32)
    assert not sentinel_saturation("add", [np.array([-5.0, 3.0, 7e4], np.float32), sentinel], out)
    assert sentinel_saturation("add", [np.array([-5.0, 3.0, 0.0], np.float32), np.array([-FP16_MAX, 0, FP16_MAX],
                                                                                       np.float32)], out)
    # a - b: b = +65504 drives the result to -65504; b = -65504 to +65504
    assert sentinel_saturation("sub", [np.zeros(3, np.float32), np.array([FP16_MAX, 0, -FP16_MAX], np.float32)], out)
    assert not sentinel_saturation("sub", [np.zeros(3, np.float32), np.array([-FP16_MAX, 0, FP16_MAX], np.float32)],
                                   out)
