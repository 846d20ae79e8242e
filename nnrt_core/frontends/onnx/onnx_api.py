"""The parts of ``onnx`` the ONNX frontend uses, through its public API.

One place names them: the checker, shape inference (whole model and per
node), the inliner, the operator schemas and the proto classes (:data:`P`,
the ``onnx`` package itself: ``P.ModelProto``, ``P.TensorProto``...,
``P.IR_VERSION``).  Importing this module imports ``onnx`` (~55 ms of a
fresh process); nothing on the path that loads a compiled ``.nnrt`` session
file imports it (``tests/test_lazy_loading.py`` checks it), and the ONNX
frontend's package imports its modules on first use.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

import onnx
import onnx.checker
import onnx.defs
import onnx.helper
import onnx.inliner
import onnx.shape_inference

__all__ = ["MAXIMUM_PROTOBUF", "P", "InferenceError", "SchemaError", "ValidationError", "check_model",
           "get_all_schemas_with_history", "get_schema", "has_schema", "infer_node_outputs", "infer_shapes",
           "inline_local_functions", "onnx_opset_version", "real_onnx"]

#: the largest serialized model onnx's C functions take (2 GiB)
MAXIMUM_PROTOBUF = onnx.checker.MAXIMUM_PROTOBUF
#: the proto classes and constants (``ModelProto``, ``TensorProto``... and ``IR_VERSION``)
P: ModuleType = onnx
ValidationError: type[Exception] = onnx.checker.ValidationError
InferenceError: type[Exception] = onnx.shape_inference.InferenceError
SchemaError: type[Exception] = onnx.defs.SchemaError


def real_onnx() -> ModuleType:
    """The ``onnx`` package (for the rare paths that need more than this module)."""
    return onnx


def check_model(model: Any, full_check: bool = False) -> None:
    """``onnx.checker.check_model`` on a ``ModelProto`` or its bytes."""
    onnx.checker.check_model(model, full_check=full_check)


def infer_shapes(model: Any, strict_mode: bool = False, data_prop: bool = False) -> Any:
    """``onnx.shape_inference.infer_shapes``: a new ``ModelProto``."""
    return onnx.shape_inference.infer_shapes(model, strict_mode=strict_mode, data_prop=data_prop)


def infer_node_outputs(schema: Any, node: Any, input_types: dict[str, Any], input_data: dict[str, Any],
                       opset_imports: dict[str, int]) -> dict[str, Any]:
    """``onnx.shape_inference.infer_node_outputs`` (opsets as domain -> version)."""
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in opset_imports.items()]
    return onnx.shape_inference.infer_node_outputs(schema, node, input_types, input_data, opset_imports=opsets)


def inline_local_functions(model: Any) -> Any:
    """``onnx.inliner.inline_local_functions``: a new ``ModelProto``."""
    return onnx.inliner.inline_local_functions(model)


def get_schema(op_type: str, max_inclusive_version: int, domain: str = "") -> Any:
    """``onnx.defs.get_schema`` (``SchemaError`` when there is none)."""
    return onnx.defs.get_schema(op_type, max_inclusive_version, domain)


def has_schema(op_type: str, domain: str = "") -> bool:
    """``onnx.defs.has``."""
    return bool(onnx.defs.has(op_type, domain))


def get_all_schemas_with_history() -> list[Any]:
    """``onnx.defs.get_all_schemas_with_history``."""
    return onnx.defs.get_all_schemas_with_history()


def onnx_opset_version() -> int:
    """``onnx.defs.onnx_opset_version``: the newest default-domain opset."""
    return int(onnx.defs.onnx_opset_version())
