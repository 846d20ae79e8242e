"""The ONNX frontend: the only part of nnrt that imports ``onnx``.

``load`` (source -> checked, sorted proto -> IR), ``validate`` (attribute
and arity checks before native code), ``external_data`` (folder and size
checks, reads into arrays), ``convert`` (protos -> IR), ``export`` (IR ->
protos), ``shapes`` (ONNX shape inference on IR), ``schemas`` (operator
schemas and opset versions), ``digest`` (the model cache key) and
``backend_adapter`` (``onnx.backend`` over ``Session``; import it from its
module).  ``onnx_api`` gives the others the onnx wheel's checker, shape
inference, schemas, inliner and proto classes without ``import onnx`` (it
falls back to the package), ``proto_build`` our ``onnx.helper`` equivalents.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from nnrt_core.lazy_names import lazy_names

if TYPE_CHECKING:
    from nnrt_core.frontends.onnx.convert import model_from_proto, tensor_to_array, type_from_proto
    from nnrt_core.frontends.onnx.digest import model_digest
    from nnrt_core.frontends.onnx.external_weights import ExternalWeights
    from nnrt_core.frontends.onnx.export import (array_to_tensor, attribute_to_proto, graph_to_onnx, to_onnx,
                                                 type_to_proto)
    from nnrt_core.frontends.onnx.external_data import MMAP_MIN_BYTES
    from nnrt_core.frontends.onnx.free_dims import apply_input_shapes, clear_unknown_dims
    from nnrt_core.frontends.onnx.load import ModelCheckError, check_model, load_onnx, parse_model_proto, sort_nodes
    from nnrt_core.frontends.onnx.protos import MAX_TENSOR_BYTES, ModelProto, ModelSource
    from nnrt_core.frontends.onnx.schemas import (convert_opset, default_opset, has_onnx_op, ir_version_for,
                                                  newest_domain_version, newest_opset_version, oldest_onnx_version,
                                                  onnx_domains, onnx_op_names, onnx_schema, onnxruntime_schemas)
    from nnrt_core.frontends.onnx.validate import ir_node_view, validate_graph, validate_node
    from nnrt_core.frontends.onnx.validate_proto import validate_model
    from nnrt_core.frontends.onnx.shapes import (NodeInferenceError, infer_node_types, infer_static_types,
                                                 refine_static_shapes)

#: public name -> the module that defines it
_LAZY: dict[str, str] = {
    **dict.fromkeys(["model_from_proto", "tensor_to_array", "type_from_proto"], "nnrt_core.frontends.onnx.convert"),
    "model_digest": "nnrt_core.frontends.onnx.digest",
    "ExternalWeights": "nnrt_core.frontends.onnx.external_weights",
    **dict.fromkeys(["array_to_tensor", "attribute_to_proto", "graph_to_onnx", "to_onnx", "type_to_proto"],
                    "nnrt_core.frontends.onnx.export"),
    "MMAP_MIN_BYTES": "nnrt_core.frontends.onnx.external_data",
    **dict.fromkeys(["apply_input_shapes", "clear_unknown_dims"], "nnrt_core.frontends.onnx.free_dims"),
    **dict.fromkeys(["ModelCheckError", "check_model", "load_onnx", "parse_model_proto", "sort_nodes"],
                    "nnrt_core.frontends.onnx.load"),
    **dict.fromkeys(["MAX_TENSOR_BYTES", "ModelProto", "ModelSource"], "nnrt_core.frontends.onnx.protos"),
    **dict.fromkeys(["convert_opset", "default_opset", "has_onnx_op", "ir_version_for", "newest_domain_version",
                     "newest_opset_version", "oldest_onnx_version", "onnx_domains", "onnx_op_names", "onnx_schema",
                     "onnxruntime_schemas"],
                    "nnrt_core.frontends.onnx.schemas"),
    **dict.fromkeys(["ir_node_view", "validate_graph", "validate_node"], "nnrt_core.frontends.onnx.validate"),
    "validate_model": "nnrt_core.frontends.onnx.validate_proto",
    **dict.fromkeys(["NodeInferenceError", "infer_node_types", "infer_static_types", "refine_static_shapes"],
                    "nnrt_core.frontends.onnx.shapes"),
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
