"""An explicit ``precision="fp16"`` is visible in the placement report: each
partition computing in fp16 gets a ``reduced_precision`` event (issue #35
item 7, its explicit part), and a device that computes in less than the
config asked is a warning."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session


def _relu_cumsum() -> bytes:
    g = h.make_graph([h.make_node("Relu", ["x"], ["t"], name="r"), h.make_node("CumSum", ["t", "ax"], ["y"], name="c")],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("y", T.FLOAT, [4])],
                     [h.make_tensor("ax", T.INT64, [], [0])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_fp16_partitions_are_named_in_the_events():
    sess = Session(_relu_cumsum(), ScheduleConfig(backends=["npu_emu", "numpy"], precision="fp16"))
    assert sess.placement == {"r": "npu_emu", "c": "numpy"}
    (ev,) = [e for e in sess.events if e.kind == "reduced_precision"]
    assert ev.backend == "npu_emu" and ev.nodes == ["r"] and "computes in fp16 (precision='fp16' asked)" in ev.message
    np.testing.assert_allclose(sess.run({"x": np.arange(4, dtype=np.float32)})["y"], [0, 1, 3, 6])


def test_an_fp16_only_chip_given_fp32_declines_its_float_nodes():
    """The emulated chip has no fp32: asked for fp32 it declines the nodes, which run in fp32 on the backup."""
    sess = Session(_relu_cumsum(), ScheduleConfig(backends=["npu_emu", "numpy"]))  # precision fp32
    assert sess.placement == {"r": "numpy", "c": "numpy"}
    why = {p.node: p for p in sess.placement_report}["r"].rejected["npu_emu"]
    assert "precision 'fp32' was asked and chip 'emu-npu-f16' computes floats in fp16 only" in why
    assert not [e for e in sess.events if e.kind == "reduced_precision"]
    x = np.array([1 + 2 ** -12, -1, 3, 2 ** -20], np.float32)  # values fp16 would round or flush
    np.testing.assert_array_equal(sess.run({"x": x})["y"], np.cumsum(np.maximum(x, 0)))


def test_no_precision_event_in_fp32_on_fp32_backends():
    sess = Session(_relu_cumsum(), ScheduleConfig(backends=["onnxruntime", "numpy"]))
    assert not [e for e in sess.events if e.kind == "reduced_precision"]


def test_a_backend_that_reports_computing_lower_than_asked_is_a_warning():
    """A plugin that takes nodes under fp32 but reports fp16 (``describe()``) is never silent."""
    from conftest import make_registry
    from fakes import fake_plugin, make_fake_backend
    from nnrt_core.backend.base import CompiledPartition

    class Fp16Only(make_fake_backend("half", ["Relu"], priority=50)):
        supported_options = frozenset({"precision"})

        def _compile(self, graph, options) -> CompiledPartition:
            part = super()._compile(graph, options)
            part.describe = lambda: {"precision": "fp16"}  # what a device without fp32 reports
            return part

    sess = Session(_relu_cumsum(), ScheduleConfig(backends=["half", "numpy"]), registry=make_registry(
        fake_plugin(Fp16Only)))
    assert sess.placement == {"r": "half", "c": "numpy"}
    (ev,) = [e for e in sess.events if e.kind == "reduced_precision"]
    assert ev.backend == "half" and ev.nodes == ["r"]
    assert "computes in fp16 although precision='fp32' was asked: its device has no fp32" in ev.message
