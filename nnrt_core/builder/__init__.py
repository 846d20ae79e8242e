"""Build models in Python, without an ONNX file (NNRt's OH_NNModel_*, MNN
Express): typed inputs, constants, schema-checked operations, outputs, then a
``Model`` that ``Session`` runs and ``to_onnx`` exports.  ``available_operations``
asks a device which nodes it supports before compiling."""
from __future__ import annotations

from nnrt_core.builder.availability import OperationSupport, available_operations, device_ids
from nnrt_core.builder.graph_builder import DEFAULT_OPSET, GraphBuilder, UnknownOperatorError, Var
from nnrt_core.builder.schema import BuilderError, known_operators

__all__ = [
    "DEFAULT_OPSET",
    "BuilderError",
    "GraphBuilder",
    "OperationSupport",
    "UnknownOperatorError",
    "Var",
    "available_operations",
    "device_ids",
    "known_operators",
]
