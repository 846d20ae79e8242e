"""The ONNX frontend: the only part of nnrt that imports ``onnx``.

``load`` (source -> checked, sorted proto -> IR), ``validate`` (attribute
and arity checks before native code), ``external_data`` (folder and size
checks, reads into arrays), ``convert`` (protos -> IR), ``export`` (IR ->
protos), ``shapes`` (ONNX shape inference on IR), ``schemas`` (operator
schemas and opset versions), ``digest`` (the model cache key) and
``backend_adapter`` (``onnx.backend`` over ``Session``; import it from its
module).  ``onnx_lite`` gives the others the onnx wheel's checker, shape
inference, schemas, inliner and proto classes without ``import onnx`` (it
falls back to the package), ``proto_build`` our ``onnx.helper`` equivalents.
"""
from __future__ import annotations

from nnrt_core.frontends.onnx.convert import model_from_proto, tensor_to_array, type_from_proto
from nnrt_core.frontends.onnx.digest import model_digest
from nnrt_core.frontends.onnx.export import (
    ExternalWeights,
    array_to_tensor,
    attribute_to_proto,
    graph_to_onnx,
    to_onnx,
    type_to_proto,
)
from nnrt_core.frontends.onnx.external_data import MMAP_MIN_BYTES
from nnrt_core.frontends.onnx.free_dims import apply_input_shapes, clear_unknown_dims
from nnrt_core.frontends.onnx.load import ModelCheckError, check_model, load_onnx, parse_model_proto, sort_nodes
from nnrt_core.frontends.onnx.protos import MAX_TENSOR_BYTES, ModelProto, ModelSource
from nnrt_core.frontends.onnx.schemas import (
    convert_opset,
    default_opset,
    has_onnx_op,
    ir_version_for,
    newest_domain_version,
    newest_opset_version,
    oldest_onnx_version,
    onnx_domains,
    onnx_op_names,
    onnx_schema,
    onnxruntime_schemas,
)
from nnrt_core.frontends.onnx.validate import ir_node_view, validate_graph, validate_node
from nnrt_core.frontends.onnx.validate_proto import validate_model
from nnrt_core.frontends.onnx.shapes import (
    NodeInferenceError,
    infer_node_types,
    infer_static_types,
    refine_static_shapes,
)

__all__ = [
    "MAX_TENSOR_BYTES",
    "MMAP_MIN_BYTES",
    "ExternalWeights",
    "ModelCheckError",
    "ModelProto",
    "ModelSource",
    "NodeInferenceError",
    "apply_input_shapes",
    "array_to_tensor",
    "attribute_to_proto",
    "check_model",
    "clear_unknown_dims",
    "convert_opset",
    "default_opset",
    "graph_to_onnx",
    "has_onnx_op",
    "infer_node_types",
    "infer_static_types",
    "ir_version_for",
    "load_onnx",
    "model_digest",
    "model_from_proto",
    "newest_domain_version",
    "newest_opset_version",
    "oldest_onnx_version",
    "onnx_domains",
    "onnx_op_names",
    "onnx_schema",
    "onnxruntime_schemas",
    "parse_model_proto",
    "refine_static_shapes",
    "sort_nodes",
    "tensor_to_array",
    "to_onnx",
    "type_from_proto",
    "type_to_proto",
    "ir_node_view",
    "validate_graph",
    "validate_model",
    "validate_node",
]
