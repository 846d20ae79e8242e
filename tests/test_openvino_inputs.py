"""The OpenVINO backend's inputs: a non-contiguous array (e.g. an image
transposed to CHW, as OCR pipelines feed it) is made contiguous and that copy
stays alive until OpenVINO has read it (it was freed before the run, and the
outputs were garbage: up to 1.0 relative error on PP-OCR models)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from nnrt_core import ScheduleConfig, Session
from onnx_models import make_model, vi

pytest.importorskip("openvino")
pytest.importorskip("nnrt_openvino")

SHAPE = (1, 3, 48, 192)  # ~110 KB of floats: PP-OCR cls's input


def _model():
    return make_model([helper.make_node("Mul", ["x", "x"], ["y"], name="sq")],
                      [vi("x", TensorProto.FLOAT, SHAPE)], [vi("y", TensorProto.FLOAT, SHAPE)])


def test_a_non_contiguous_input_gives_the_same_result_as_its_contiguous_copy():
    sess = Session(_model(), ScheduleConfig(backends=["openvino"], backup=None))
    assert {p.backend for p in sess.partitions} == {"openvino"}
    hwc = np.random.default_rng(0).standard_normal((SHAPE[2], SHAPE[3], SHAPE[1])).astype(np.float32)
    x = hwc.transpose(2, 0, 1)[None].astype(np.float32)  # astype keeps the transposed strides
    assert not x.flags.c_contiguous
    for _ in range(3):  # the freed copy's memory is reused by then
        got = sess.run({"x": x})["y"]
        junk = [np.full(SHAPE, 7.0, np.float32) for _ in range(4)]  # allocations that would reuse a freed copy
        np.testing.assert_allclose(got, x * x, rtol=1e-6, atol=0)
        del junk
