"""The NPU emulator widens each fp16 constant to fp32 once per process: the
plans of one model specialized per input shape share one fp32 copy of its
weights (``nnrt_npu_emu.binding.widened``)."""
from __future__ import annotations

import gc
import weakref

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session
from nnrt_npu_emu.binding import widened


def test_equal_fp16_constants_share_one_exact_read_only_fp32_copy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 32)).astype(np.float16)
    w = widened(a)
    assert w.dtype == np.float32 and not w.flags.writeable
    np.testing.assert_array_equal(w, a.astype(np.float32))
    assert widened(a.copy()) is w  # the same bytes and shape: the same array
    assert widened(a.reshape(32, 64)) is not w  # another shape
    b = a.copy()
    b[0, 0] = np.float16(7.0)
    assert widened(b) is not w and widened(b)[0, 0] == 7.0
    ref = weakref.ref(w)
    del w
    gc.collect()
    assert ref() is None  # the process-wide table does not keep a copy nobody holds


def test_plans_for_two_input_shapes_run_on_shared_weights_and_agree():
    rng = np.random.default_rng(4)
    wt = h.make_tensor("w", T.FLOAT, [32, 64], rng.standard_normal(32 * 64).astype(np.float32).tolist())
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, "L", 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, "L", 64])], [wt])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    sess = Session(m, ScheduleConfig(precision="fp16", backends=["npu_emu", "onnxruntime"], backup="numpy"))
    x = rng.random((1, 6, 32), dtype=np.float32)
    y6 = sess.run({"x": x})["y"]
    y4 = sess.run({"x": x[:, :4]})["y"]
    assert set(sess.placement.values()) == {"npu_emu"} and len(sess.specializations) == 2
    np.testing.assert_array_equal(y4, y6[:, :4])  # row by row the same fp16 arithmetic on the same weights
