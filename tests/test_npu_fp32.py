"""Under ``precision="fp32"`` (the default) the emulated NPU, whose chips
compute in fp16 or int8, declines every node it would not compute
bit-exactly as fp32 would; exact non-float work (masks, comparisons, boolean
logic, exact casts) stays on it (nnrt_npu_emu.lowering.capability.exact_in_fp32)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

pytest.importorskip("nnrt_npu_emu")

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from test_npu_qdq import _cnn  # noqa: E402

NPU = dict(backends=["npu_emu"], backup="numpy")


def _mask_model() -> bytes:
    """An attention-mask path (int64 ids -> Equal 0 -> Not -> Cast float -> Mul) beside a float Relu."""
    g = h.make_graph(
        [h.make_node("Equal", ["ids", "zero"], ["pad"], name="eq"),
         h.make_node("Not", ["pad"], ["keep"], name="not"),
         h.make_node("Cast", ["keep"], ["keepf"], name="cast", to=T.FLOAT),
         h.make_node("Relu", ["x"], ["r"], name="relu"),
         h.make_node("Mul", ["r", "keepf"], ["y"], name="mul"),
         h.make_node("Less", ["x", "half"], ["small"], name="less")],
        "mask", [h.make_tensor_value_info("ids", T.INT64, [2, 8]), h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, 8]), h.make_tensor_value_info("small", T.BOOL, [2, 8])],
        [h.make_tensor("zero", T.INT64, [], [0]), h.make_tensor("half", T.FLOAT, [], [0.5])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 3, (2, 8)).astype(np.int64)
    x = (rng.standard_normal((2, 8)) + 2 ** -13).astype(np.float32)
    x[0, 0] = 0.5 - 2 ** -14  # fp16 rounds it to 0.5: Less(x, 0.5) would change on an fp16 chip
    return {"ids": ids, "x": x}


def test_fp32_keeps_only_exact_nodes_on_the_chip_and_says_why_the_rest_left():
    sess = Session(_mask_model(), ScheduleConfig(**NPU))  # precision fp32
    assert sess.placement == {"eq": "npu_emu", "not": "npu_emu", "cast": "npu_emu", "relu": "numpy",
                              "mul": "numpy", "less": "numpy"}
    report = {p.node: p for p in sess.placement_report}
    for name, op in (("relu", "Relu"), ("mul", "Mul"), ("less", "Less")):
        why = report[name].rejected["npu_emu"]
        assert "precision 'fp32' was asked and chip 'emu-npu-f16' computes floats in fp16 only" in why
        assert f"{op} reads or writes float values" in why and "precision='fp16'" in why
    (npu,) = [p for p in sess.partitions if p.backend == "npu_emu"]
    assert npu.details["precision"] == "fp32"  # nothing it computes is rounded
    assert not [e for e in sess.events if e.kind == "reduced_precision"]
    feeds = _feeds()
    ref = Session(_mask_model(), ScheduleConfig(backends=["numpy"])).run(feeds)
    got = sess.run(feeds)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])  # bit-exact
    assert got["small"][0, 0]


def test_fp16_takes_the_float_nodes_knowingly():
    sess = Session(_mask_model(), ScheduleConfig(**NPU, precision="fp16"))
    assert set(sess.placement.values()) == {"npu_emu"}
    assert [e for e in sess.events if e.kind == "reduced_precision"]
    assert not sess.run(_feeds())["small"][0, 0]  # the fp16 rounding shows: 0.5 - 2**-14 became 0.5


def test_the_int8_chip_declines_quantized_groups_under_fp32():
    model = _cnn()
    fp32 = Session(model, ScheduleConfig(**NPU, devices={"npu_emu": "emu-npu-i8"}))
    assert "npu_emu" not in set(fp32.placement.values())
    why = {p.node: p for p in fp32.placement_report}
    # every float node: the chip computes in int8 only; the integer Flatten qdq_cleanup makes (its DQ -> Flatten -> Q
    # chain is declined under fp32, so nothing keeps the float form): the chip holds no int8 outside its groups
    assert all("chip 'emu-npu-i8' computes only in int8" in p.rejected["npu_emu"]
               or "dtype int8" in p.rejected["npu_emu"] and p.op_type == "Flatten" for p in why.values())
    int8 = Session(model, ScheduleConfig(**NPU, precision="int8"))
    assert [p.backend for p in int8.partitions] == ["npu_emu"]


def test_auto_tries_the_chip_in_its_own_precision():
    sess = Session(_mask_model(), ScheduleConfig(**NPU, precision="auto"))
    plans = {p.get("label"): p for p in sess.considered_plans}
    assert any(p.get("precision") == "fp16" for p in plans.values()), plans
    assert any(p.get("precision") == "fp32" for p in plans.values()), plans
