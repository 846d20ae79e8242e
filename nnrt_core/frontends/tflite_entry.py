"""Loading a TFLite source without importing the frontend until one is seen
(the ``tflite`` package is the optional extra ``nnrt[tflite]``)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from nnrt_core.errors import ConfigError, ModelLoadError
from nnrt_core.ir import Model, TensorType

__all__ = ["load_tflite_source"]


def load_tflite_source(source: Any, input_shapes: Mapping[str, Sequence[int]] | None = None,
                       plugin_ops: Callable[[], Any] | None = None) -> Model:
    """The IR model of a ``.tflite`` path or bytes.  ``input_shapes`` may set an
    input's free dimensions (``shape_signature`` -1) and only restate the others
    (anything else is a ``ConfigError``).
    ``plugin_ops`` (``Registry.tflite_custom_ops``) is asked for plugins' custom-operator
    mappers when the model has unclaimed custom operators."""
    try:
        from nnrt_core.frontends.tflite import load_tflite
    except ImportError as e:
        raise ModelLoadError(f"reading .tflite models needs the 'tflite' package (pip install 'nnrt[tflite]'): "
                             f"{e}") from e
    model = load_tflite(source, plugin_ops, input_shapes)
    declared = {v.name: v.type.shape for v in model.graph.inputs if isinstance(v.type, TensorType)}
    for name, shape in (input_shapes or {}).items():
        if name not in declared:
            raise ConfigError(f"input_shapes names {name!r}, which is no input of this TFLite model "
                              f"(inputs: {sorted(declared)})")
        if tuple(int(d) for d in shape) != tuple(declared[name]):
            raise ConfigError(f"input_shapes[{name!r}] = {list(shape)}, but the model's input {name!r} "
                              f"is {list(declared[name])}")
    return model
