"""Small ONNX models the backend tests share (ORT, OpenVINO)."""
from __future__ import annotations

import onnx
from onnx import TensorProto, helper

__all__ = ["chain_model", "make_model", "vi"]


def make_model(nodes, inputs, outputs, opset: int = 17, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name: str, elem: int = TensorProto.FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, elem, list(shape) if shape is not None else None)


def chain_model() -> onnx.ModelProto:
    """a -> Add(a, a)=x -> Relu=r -> Mul(x, r)=y"""
    return make_model(
        [helper.make_node("Add", ["a", "a"], ["x"], name="add"),
         helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Mul", ["x", "r"], ["y"], name="mul")],
        [vi("a")], [vi("y")])
