"""ONNX shape inference with data propagation only where it cannot bomb.

onnx's data propagation (``infer_shapes(data_prop=True)``) represents a
tensor's values as one ``TensorShapeProto`` dimension per element (about
70 bytes each) for every rank-0/1 tensor it looks at, in C++, where neither
the session's memory budget nor its deadline reaches: a model that declares
an input ``[2**62]`` (or reshapes a tensor to a length it computes from
``Shape``) makes it allocate until the process dies (issue #35).

So inference runs in two steps: without data propagation first (it never
allocates per element; when it already gives every value a static type,
that is the result), then, only when every rank-1 value of that result
has a known length of at most :data:`DATA_PROP_MAX_DIM`, with it.  A rank-1
value of unknown length could get a huge one from the propagated data, so it
also keeps data propagation off; the first result is returned then, and the
value that decided it is logged.  Data propagation only refines shapes
computed from ``Shape`` chains, whose tensors have a few elements; nnrt's own
passes fold those chains when the inputs are static
(:func:`~nnrt_core.frontends.onnx.shapes.refine_static_shapes`).
"""
from __future__ import annotations

from typing import Any, Iterable

from nnrt_core.frontends.onnx import onnx_api
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.logs import get_logger

__all__ = ["DATA_PROP_MAX_DIM", "data_prop_blocker", "infer_shapes_bounded"]

log = get_logger("nnrt.onnx")

#: the longest rank-1 tensor data propagation may see (2**16 elements: ~4.6 MB of C++ dims)
DATA_PROP_MAX_DIM = 1 << 16


def infer_shapes_bounded(model: Any) -> P.ModelProto:
    """``infer_shapes(strict_mode=False)`` of ``model`` (a ``ModelProto`` or
    its bytes) with data propagation when :func:`data_prop_blocker` finds
    nothing against it in the inference without."""
    plain = onnx_api.infer_shapes(model, strict_mode=False, data_prop=False)
    if _all_static(plain.graph):  # nothing left for data propagation to refine: one pass
        return plain
    blocker = data_prop_blocker(plain.graph)
    if blocker is not None:
        log.info("ONNX shape inference without data propagation: %s", blocker)
        return plain
    return onnx_api.infer_shapes(model, strict_mode=False, data_prop=True)


def data_prop_blocker(g: P.GraphProto) -> str | None:
    """Why data propagation must not run over ``g`` (inferred without it):
    the first rank-1 value whose length is unknown or over
    :data:`DATA_PROP_MAX_DIM`, or ``None``."""
    for vi in _typed_values(g):
        tt = vi.type.tensor_type
        if not tt.HasField("shape") or len(tt.shape.dim) != 1:
            continue
        d = tt.shape.dim[0]
        if not d.HasField("dim_value"):
            return f"value {vi.name!r} is rank 1 of unknown length"
        if d.dim_value > DATA_PROP_MAX_DIM:
            return f"value {vi.name!r} is rank 1 of length {d.dim_value} (over {DATA_PROP_MAX_DIM})"
    for t in g.initializer:
        if len(t.dims) == 1 and t.dims[0] > DATA_PROP_MAX_DIM:
            return f"initializer {t.name!r} is rank 1 of length {t.dims[0]} (over {DATA_PROP_MAX_DIM})"
    return None


def _all_static(g: P.GraphProto) -> bool:
    """Every node output of ``g`` that is read (by a node or as a graph output)
    has a static tensor type, and no node has sub-graphs."""
    static = {vi.name for vi in [*g.input, *g.value_info, *g.output] if vi.type.HasField("tensor_type")
              and vi.type.tensor_type.HasField("shape")
              and all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)}
    static.update(t.name for t in g.initializer)
    read = {i for n in g.node for i in n.input if i} | {o.name for o in g.output}
    return all(o in static for o in read) and \
        not any(a.type in (P.AttributeProto.GRAPH, P.AttributeProto.GRAPHS) for n in g.node for a in n.attribute)


def _typed_values(g: P.GraphProto) -> Iterable[P.ValueInfoProto]:
    """The tensor-typed values of ``g`` and of its nodes' sub-graphs."""
    for vi in [*g.input, *g.value_info, *g.output]:
        if vi.type.HasField("tensor_type"):
            yield vi
    for n in g.node:
        for a in n.attribute:
            for sub in [a.g] if a.type == P.AttributeProto.GRAPH else a.graphs:
                yield from _typed_values(sub)
