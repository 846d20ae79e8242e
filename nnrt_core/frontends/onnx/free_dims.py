"""Declared dimensions of a ``ModelProto``: non-standard "any size" dims and
free input dimensions fixed by the caller."""
from __future__ import annotations

from typing import Iterator, Mapping, Sequence

from nnrt_core.errors import ConfigError
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.protos import subgraphs, unknown_dim

__all__ = ["apply_input_shapes", "clear_unknown_dims", "has_unknown_dims"]


def _value_infos(g: P.GraphProto) -> Iterator[P.ValueInfoProto]:
    """Every typed value declaration of ``g`` and its sub-graphs."""
    yield from g.input
    yield from g.output
    yield from g.value_info
    for n in g.node:
        for sub in subgraphs(n):
            yield from _value_infos(sub)


def _tensor_shapes(tp: P.TypeProto) -> Iterator[P.TensorShapeProto]:
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, kind)
        if tt.HasField("shape"):
            yield tt.shape
    elif kind == "sequence_type":
        yield from _tensor_shapes(tp.sequence_type.elem_type)
    elif kind == "optional_type":
        yield from _tensor_shapes(tp.optional_type.elem_type)


def has_unknown_dims(proto: P.ModelProto) -> bool:
    """True when some declared dimension says "any size" in a non-standard way."""
    return any(unknown_dim(d) for vi in _value_infos(proto.graph) for s in _tensor_shapes(vi.type)
               for d in s.dim)


def clear_unknown_dims(proto: P.ModelProto) -> int:
    """Turn negative ``dim_value`` s and ``dim_param: "?"`` into unknown
    dimensions, in place (ONNX Runtime treats both as dynamic).  Returns how
    many dimensions changed."""
    changed = 0
    for vi in _value_infos(proto.graph):
        for s in _tensor_shapes(vi.type):
            for d in s.dim:
                if unknown_dim(d):
                    d.ClearField("dim_value")
                    d.ClearField("dim_param")
                    changed += 1
    return changed


def _dims_text(shape: P.TensorShapeProto) -> str:
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                           for d in shape.dim) + "]"


def apply_input_shapes(proto: P.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> None:
    """Fix the shapes of graph inputs of ``proto`` in place (see
    ``load_onnx``).  Shape inference then refines the recorded shapes
    of intermediate values (a symbolic dimension merges with the static one
    inferred)."""
    g = proto.graph
    inits = {t.name for t in g.initializer}
    inputs = {vi.name: vi for vi in g.input if vi.name not in inits}
    unknown = sorted(set(input_shapes) - set(inputs))
    if unknown:
        raise ConfigError(f"input_shapes names unknown input(s) {unknown}; the model's inputs are "
                          + ", ".join(f"{n} {_dims_text(vi.type.tensor_type.shape)}"
                                      if vi.type.HasField("tensor_type") else n for n, vi in inputs.items()))
    for name, dims in input_shapes.items():
        vi = inputs[name]
        if not vi.type.HasField("tensor_type"):
            raise ConfigError(f"input_shapes: input {name!r} is not a tensor; its shape cannot be fixed")
        tt = vi.type.tensor_type
        dims = [int(x) for x in dims]
        if tt.HasField("shape"):
            shape = tt.shape
            if len(shape.dim) != len(dims):
                raise ConfigError(f"input_shapes: input {name!r} has rank {len(shape.dim)} (shape "
                                  f"{_dims_text(shape)}), got {len(dims)} dimensions {dims}")
            for i, (d, n) in enumerate(zip(shape.dim, dims)):
                if d.HasField("dim_value") and d.dim_value >= 0 and d.dim_value != n:
                    raise ConfigError(f"input_shapes: input {name!r} has a fixed dimension {i} of size "
                                      f"{d.dim_value} (shape {_dims_text(shape)}); got {dims}")
        del tt.shape.dim[:]
        for n in dims:
            tt.shape.dim.add().dim_value = n
