"""Per-node rules of the builder that ONNX schemas do not cover: output
counts, Conv channel checks, node names, literal types, sub-graph copies."""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from nnrt_core.builder.schema import BuilderError, OpSpec
from nnrt_core.builder.var import Var
from nnrt_core.ir import Attribute, DataType, Graph, Model, Value
from nnrt_core.ir.clone import clone_graph

__all__ = ["check_conv_channels", "default_num_outputs", "detached_graphs", "sibling_dtype", "snake_case"]


def snake_case(op_type: str) -> str:
    """``GlobalAveragePool`` -> ``global_average_pool``, ``LRN`` -> ``lrn``."""
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", op_type)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()


def sibling_dtype(spec: OpSpec, index: int, inputs: Sequence[Any]) -> DataType | None:
    """Element type for a Python number/list at input ``index``: that of a
    builder value bound to the same type parameter (``x + 1.0`` stays
    float16 when ``x`` is), else ``None`` (float32 / int64 defaults)."""
    formal = spec.formal_inputs()
    if not formal:
        return None

    def param(i: int) -> str:
        return formal[min(i, len(formal) - 1)][1]

    for j, x in enumerate(inputs):
        if j != index and isinstance(x, Var) and param(j) == param(index):
            if x.dtype is not None and x.dtype != DataType.UNDEFINED:
                return x.dtype
    return None


def detached_graphs(value: Any) -> Any:
    """Sub-graph attribute values as private copies (a built model may be
    reused as the body of several nodes)."""
    def one(g: Any) -> Any:
        g = g.graph if isinstance(g, Model) else g
        if isinstance(g, Graph):
            g = clone_graph(g)
            g.opset_imports = {}
        return g
    if isinstance(value, (list, tuple)):
        return [one(g) for g in value]
    return one(value)


def default_num_outputs(spec: OpSpec, op_type: str, domain: str, attrs: Mapping[str, Attribute],
                         inputs: Sequence[Value | None], where: str) -> int:
    """How many outputs a node makes when the caller does not say: a
    control-flow body's outputs, Split's pieces, else the schema's minimum."""
    if domain == "":
        body = {"If": "then_branch", "Loop": "body", "Scan": "body", "SequenceMap": "body"}.get(op_type)
        if body is not None and body in attrs:
            n = len(attrs[body].value.outputs)
            return n - 1 if op_type == "Loop" else n
        if op_type == "Split":
            if "num_outputs" in attrs:
                return int(attrs["num_outputs"].value)
            if "split" in attrs:
                return len(attrs["split"].value)
            if len(inputs) > 1 and inputs[1] is not None and inputs[1].const is not None:
                return int(inputs[1].const.size)
            raise BuilderError(f"{where}: cannot tell how many outputs to make; pass num_outputs= "
                               "or constant split sizes")
    return max(1, int(spec.schema.min_output))


def check_conv_channels(op_type: str, inputs: Sequence[Value | None], attrs: Mapping[str, Attribute],
                         where: str) -> None:
    """ONNX shape inference does not compare Conv channels; do it here."""
    if op_type not in ("Conv", "ConvTranspose") or len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        return
    x, w = inputs[0], inputs[1]
    xs, ws = x.shape, w.shape
    if xs is None or ws is None:
        return
    if len(xs) != len(ws) or len(xs) < 3:
        raise BuilderError(f"{where}: X {x.name!r} {x.type} and W {w.name!r} {w.type} must have the same rank "
                           f"(>= 3: batch, channels, spatial dims)")
    group = int(attrs["group"].value) if "group" in attrs else 1
    c_in, w_in = xs[1], ws[0] if op_type == "ConvTranspose" else ws[1]
    if op_type == "Conv":
        expected = w_in * group if isinstance(w_in, int) else None
        out_channels = ws[0]
    else:
        expected = w_in
        out_channels = ws[1] * group if isinstance(ws[1], int) else None
    if isinstance(c_in, int) and isinstance(expected, int) and c_in != expected:
        rule = f"W dim 1 ({w_in}) x group ({group})" if op_type == "Conv" else f"W dim 0 ({w_in})"
        raise BuilderError(f"{where}: X {x.name!r} has {c_in} channels (dim 1 of {x.type}) but "
                           f"{rule} = {expected} (W {w.name!r} {w.type})")
    if op_type == "Conv" and isinstance(ws[0], int) and ws[0] % group:
        raise BuilderError(f"{where}: W {w.name!r} has {ws[0]} output channels, not divisible by group {group}")
    if len(inputs) > 2 and inputs[2] is not None and inputs[2].shape is not None:
        b = inputs[2]
        if len(b.shape) != 1 or (isinstance(b.shape[0], int) and isinstance(out_channels, int)
                                 and b.shape[0] != out_channels):
            raise BuilderError(f"{where}: B {b.name!r} {b.type} must be 1-D with {out_channels} "
                               "elements (one per output channel)")
