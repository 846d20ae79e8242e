"""Loading a TFLite source without importing the frontend until one is seen
(the ``tflite`` package is the optional extra ``nnrt[tflite]``)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from nnrt_core.errors import ConfigError, ModelLoadError
from nnrt_core.ir import Model, TensorType

__all__ = ["load_tflite_source"]


def load_tflite_source(source: Any, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """The IR model of a ``.tflite`` path or bytes.  TFLite shapes are static:
    ``input_shapes`` may only restate them (anything else is a ``ConfigError``)."""
    try:
        from nnrt_core.frontends.tflite import load_tflite
    except ImportError as e:
        raise ModelLoadError(f"reading .tflite models needs the 'tflite' package (pip install 'nnrt[tflite]'): "
                             f"{e}") from e
    model = load_tflite(source)
    declared = {v.name: v.type.shape for v in model.graph.inputs if isinstance(v.type, TensorType)}
    for name, shape in (input_shapes or {}).items():
        if name not in declared:
            raise ConfigError(f"input_shapes names {name!r}, which is no input of this TFLite model "
                              f"(inputs: {sorted(declared)})")
        if tuple(int(d) for d in shape) != tuple(declared[name]):
            raise ConfigError(f"input_shapes[{name!r}] = {list(shape)}, but TFLite models have static shapes: "
                              f"{name!r} is {list(declared[name])}")
    return model
