"""A streaming int8 TFLite model (state concatenated to the input, sliced back out, a fused-ReLU conv): the
session's ``qdq_cleanup`` runs the concat and slice on the integers and drops the ReLU, with fewer nodes and
the same outputs as level ``none``, within one step of LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert")

from tflite_models import TFLiteWriter, litert_run  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402

S, Z = 0.05, -3  #: the parameters the stream shares (TFLite keeps them across concat and slice)


def streaming_model() -> bytes:
    rng = np.random.default_rng(5)
    w = TFLiteWriter()
    x = w.input("x", [1, 4, 1, 8], np.int8, quant=(S, Z, 0))
    state = w.input("state", [1, 2, 1, 8], np.int8, quant=(S, Z, 0))
    cat = w.tensor("cat", [1, 6, 1, 8], np.int8, quant=(S, Z, 0))
    w.op("CONCATENATION", [state, x], [cat], "ConcatenationOptions", Axis=1)
    new_state = w.tensor("new_state", [1, 2, 1, 8], np.int8, quant=(S, Z, 0))
    consts = [w.const(k, np.array(v, np.int32)) for k, v in (("b", [0, 4, 0, 0]), ("e", [1, 6, 1, 8]),
                                                              ("st", [1, 1, 1, 1]))]
    w.op("STRIDED_SLICE", [cat, *consts], [new_state], "StridedSliceOptions")
    ws = rng.uniform(0.005, 0.01, 6).astype(np.float32)
    wt = w.const("w", rng.integers(-127, 128, (6, 3, 1, 8)).astype(np.int8), quant=(ws, np.zeros(6), 0))
    b = w.const("bias", rng.integers(-300, 300, 6).astype(np.int32), quant=(ws * S, np.zeros(6), 0))
    y = w.tensor("y", [1, 4, 1, 6], np.int8, quant=(0.04, -128, 0))  # zero point at int8's minimum: ReLU is free
    w.op("CONV_2D", [cat, wt, b], [y], "Conv2DOptions", Padding=1, StrideW=1, StrideH=1,
         FusedActivationFunction=1)
    w.outputs = [y, new_state]
    return w.build()


@pytest.mark.parametrize("backend", ["numpy", "onnxruntime"])
def test_streaming_int8_model_gets_leaner_with_the_same_outputs(backend):
    model = streaming_model()
    rng = np.random.default_rng(0)
    feeds = [rng.integers(-128, 128, (1, 4, 1, 8)).astype(np.int8),
             rng.integers(-128, 128, (1, 2, 1, 8)).astype(np.int8)]
    plain = Session(model, ScheduleConfig(backends=[backend], optimization_level="none"))
    lean = Session(model, ScheduleConfig(backends=[backend]))
    names = [i.name for i in lean.inputs]
    want = plain.run(dict(zip(names, feeds)))
    got = lean.run(dict(zip(names, feeds)))
    for k in want:
        assert np.array_equal(got[k], want[k]) and got[k].dtype == want[k].dtype, k
    before = [n.op_type for n in plain.graph.nodes]
    after = [n.op_type for n in lean.graph.nodes]
    assert len(after) < len(before) and "Relu" in before and "Relu" not in after, (before, after)
    for n in lean.graph.nodes:
        if n.op_type in ("Concat", "Slice"):
            assert n.outputs[0].dtype.name == "INT8", n
    ref = litert_run(model, feeds)
    for r, g in zip(ref, got.values()):
        assert r.shape == g.shape and np.abs(r.astype(int) - g.astype(int)).max() <= 1
