"""Stage 0: the model a build may transform, from whatever the user passed."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from nnrt_core.frontends.detect import is_tflite_source
from nnrt_core.frontends.tflite_entry import load_tflite_source
from nnrt_core.ir import Graph, Model
from nnrt_core.ir.clone import clone_graph

__all__ = ["load_model"]


def load_model(model: Any, input_shapes: Mapping[str, Sequence[int]] | None = None,
               plugin_ops: Callable[[], Any] | None = None) -> Model:
    """A path or bytes (ONNX or TFLite), ``onnx.ModelProto``, IR ``Model`` or IR ``Graph`` as a
    Model the caller may transform (IR inputs are copied, weights shared).
    ``input_shapes`` fixes free input dimensions before shape inference
    (``ScheduleConfig.input_shapes``; IR models go through ONNX for it).
    IR nodes pass the same attribute and arity checks as ONNX files.
    ``plugin_ops``: plugins' TFLite custom-operator mappers (``Registry.tflite_custom_ops``)."""
    from nnrt_core.frontends import load_onnx, to_onnx, validate_graph  # onnx: not for session files
    if isinstance(model, (Model, Graph)):
        validate_graph(model.graph if isinstance(model, Model) else model)
    if input_shapes and isinstance(model, (Model, Graph)):
        src = model if isinstance(model, Model) else Model(graph=model)
        loaded = load_onnx(to_onnx(src), check=False, input_shapes=input_shapes)
        loaded.base_dir = src.base_dir
        return loaded
    if isinstance(model, Model):
        return model.replace(graph=clone_graph(model.graph), metadata=dict(model.metadata))
    if isinstance(model, Graph):
        return Model(graph=clone_graph(model))
    if is_tflite_source(model):
        loaded = load_tflite_source(model, input_shapes, plugin_ops)
        validate_graph(loaded.graph)  # the mappers' nodes pass the checks ONNX files do
        return loaded
    return load_onnx(model, input_shapes=input_shapes or None)
