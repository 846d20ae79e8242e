"""Nodes of ONNX Runtime's contrib domain without an opset import: ONNX
Runtime imports the domain itself (its transformer optimizer writes such
files), so nnrt loads them too; other undeclared domains stay refused."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ModelLoadError


def _model(domain: str) -> bytes:
    node = helper.make_node("FastGelu", ["x"], ["y"], domain=domain)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_contrib_domain_without_import_loads_like_onnxruntime():
    data = _model("com.microsoft")
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = Session(data, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_unknown_domain_without_import_is_still_refused():
    with pytest.raises(ModelLoadError, match="No opset import for domain 'example.custom'"):
        Session(_model("example.custom"), ScheduleConfig(backends=["numpy"]))
