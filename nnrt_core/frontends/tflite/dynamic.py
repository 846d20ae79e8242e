"""Free input dimensions: ``shape_signature`` entries of -1.

A TFLite converter writes ``-1`` in a tensor's ``shape_signature`` for a
dimension it does not know, and a placeholder (often 1) in its ``shape``;
LiteRT re-derives every shape after ``resize_tensor_input``.  When a graph
input has such a dimension, :func:`resolve_shapes` does the same at import:
it fixes the inputs to the declared shape or to ``input_shapes``
(``ScheduleConfig.input_shapes``), re-derives every tensor's shape with the
rules of ``shape_rules.py`` and folds the small integer tensors of shape
arithmetic (``SHAPE -> GATHER -> PACK -> RESHAPE`` chains) to constants.
Models without free dimensions are not touched."""
from __future__ import annotations

import dataclasses
import math
import struct
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.errors import ConfigError, ModelLoadError, UnsupportedNodeError
from nnrt_core.frontends.tflite.context import OperatorRef
from nnrt_core.frontends.tflite.schema import GUARDED_ERRORS, FlatModel, TensorInfo, corrupt, guarded
from nnrt_core.frontends.tflite.shape_rules import RULES, OpView, Shape, fold_int
from nnrt_core.frontends.tflite.table import OPERATOR, SUBGRAPH, Columns, Table

__all__ = ["Resolved", "resolve_shapes", "signatures"]

_SHAPE_SIGNATURE = 18  #: vtable offset of ``Tensor.shape_signature`` (field 7)
_MAX_FOLD = 1 << 16  #: integer tensors up to this many elements are folded at import


@dataclasses.dataclass
class Resolved:
    """Re-derived tensors, folded integer values and the operators they make unnecessary."""

    tensors: list[TensorInfo]
    folded: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    skip_ops: set[int] = dataclasses.field(default_factory=set)


def signatures(sg: Table, which: Sequence[int], buf: np.ndarray | None = None) -> dict[int, tuple[int, ...] | None]:
    """``shape_signature`` of tensors ``which`` (``None`` when the file stores none).  With
    ``buf`` (the file as uint8) and more than a few tensors, the tables are read column-wise;
    a corrupt table falls back to reading one table at a time, whose error names the part."""
    if buf is not None and len(which) > 8:
        bulk = _signatures_bulk(sg, which, buf)
        if bulk is not None:
            return bulk
    out = {}
    with guarded("shape signatures"):
        # a few (the graph inputs): only their tables; every tensor: the whole vector at once
        tables = sg.tables(SUBGRAPH.tensors) if len(which) > 8 else None
        for t in which:
            tab = tables[t] if tables is not None else sg.table_at(SUBGRAPH.tensors, t)
            sig = tab.numbers(_SHAPE_SIGNATURE, np.int32)
            out[t] = tuple(sig.tolist()) if sig.size else None
    return out


def _signatures_bulk(sg: Table, which: Sequence[int], buf: np.ndarray) -> dict[int, tuple[int, ...] | None] | None:
    """:func:`signatures` from the tensor tables read column-wise (``None`` when any position
    lies outside the file or ``which`` names a tensor the vector lacks)."""
    try:
        start, n = sg.vector_position(SUBGRAPH.tensors)
        cols = Columns(buf, start, n)
        at = cols.ref(_SHAPE_SIGNATURE)
        lengths = cols.lengths(at, 4).tolist()
    except GUARDED_ERRORS:
        return None
    if any(not 0 <= t < n for t in which):
        return None
    data, unpack, at = sg.buf, struct.unpack_from, at.tolist()
    return {t: unpack(f"<{lengths[t]}i", data, at[t] + 4) if lengths[t] else None for t in which}


def resolve_shapes(flat: FlatModel, sg: Table, tensors: list[TensorInfo], inputs: Sequence[int],
                   input_shapes: Mapping[str, Sequence[int]] | None) -> Resolved:
    """``tensors`` with shapes re-derived from the (fixed) input shapes when an
    input has free dimensions; unchanged otherwise."""
    sigs = signatures(sg, inputs)
    fixed = _input_shapes(tensors, inputs, sigs, input_shapes or {})
    if not any(s is not None and -1 in s for s in sigs.values()):
        return Resolved(tensors)
    all_sigs = signatures(sg, range(len(tensors)), flat.buf)
    # constants, empty ones (no buffer data) included; produced tensors are overwritten in order
    consts = [t for t, info in enumerate(tensors) if info.data is not None or 0 in info.shape]
    shapes: dict[int, Shape] = {t: tensors[t].shape for t in consts}
    shapes.update(fixed)
    values: dict[int, np.ndarray] = {}
    for t in consts:
        info = tensors[t]
        if info.sparse is None and info.dtype.numpy.kind in "iu" and t not in fixed:
            values[t] = info.data if info.data is not None else np.zeros(info.shape, info.dtype.numpy)
    res = Resolved(tensors)
    names, io = flat.op_names(sg), flat.operator_io(sg)  # read once per subgraph (convert() reads them too)
    for k, op in enumerate(flat.operators(sg)):
        try:  # the accessors (options included) of a corrupt file, as convert() guards them
            if io is None:  # few operators, or a corrupt table: this one's own lists
                ins, outs = op.i32s(OPERATOR.inputs), op.i32s(OPERATOR.outputs)
            else:
                ins, outs = io[k]
            _resolve_op(op, k, names[k][0], ins, outs, tensors, all_sigs, shapes, values, res)
        except GUARDED_ERRORS as e:
            raise corrupt(f"operator {k}", e) from e
    res.tensors = [info if shapes.get(t, info.shape) == info.shape else dataclasses.replace(info, shape=shapes[t])
                   for t, info in enumerate(tensors)]
    return res


def _resolve_op(op: Table, k: int, name: str, ins: Sequence[int], outs: Sequence[int], tensors: list[TensorInfo],
                sigs: Mapping[int, tuple[int, ...] | None], shapes: dict[int, Shape],
                values: dict[int, np.ndarray], res: Resolved) -> None:
    """Derive operator ``k``'s (``name``, ``ins`` -> ``outs``) output shapes, and fold its
    integer outputs when it can."""
    ctx = OperatorRef(op, k, name)
    in_shapes = [shapes.get(t) if t >= 0 else None for t in ins]
    in_values = [values.get(t) if t >= 0 else None for t in ins]
    out_shapes = _derive(ctx, tensors, sigs, in_shapes, in_values, ins, outs)
    for t, s in zip(outs, out_shapes):
        if t >= 0:
            shapes[t] = s
    if name not in RULES or any(math.prod(s) > _MAX_FOLD for s in out_shapes):
        return
    if not set(outs).isdisjoint(ins):  # (a corrupt operator reading its own output sees its new shape)
        in_shapes = [shapes.get(t) if t >= 0 else None for t in ins]
    if name not in ("SHAPE", "FILL") and any(v is None for v in in_values):
        return  # fold_int folds nothing with an unknown input (a tensor computed at run time)
    view = OpView(ctx, in_shapes, in_values, [tensors[t].dtype.numpy for t in outs])
    try:
        folded = fold_int(view, out_shapes)
    except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError) as e:
        raise ctx.fail(f"cannot evaluate its integer outputs at import: {e}") from e
    if folded is not None:
        values.update(zip(outs, folded))
        res.folded.update(zip(outs, folded))
        res.skip_ops.add(k)


def _derive(ctx: OperatorRef, tensors: list[TensorInfo], sigs: Mapping[int, tuple[int, ...] | None],
            in_shapes: list[Shape | None], in_values: list[np.ndarray | None], ins: Sequence[int],
            outs: Sequence[int]) -> list[Shape]:
    """The output shapes of one operator (input shapes and known values ``in_shapes`` /
    ``in_values``): its rule, or the declared shapes when it has none and they are static."""
    n = len(tensors)
    for t in (*ins, *outs):
        if not -1 <= t < n:
            raise ModelLoadError(f"{ctx.desc} refers to tensor {t}; the subgraph has {n}")
    rule = RULES.get(ctx.op_name)
    if rule is None:
        dynamic = [tensors[t].name for t in outs if t >= 0 and -1 in (sigs[t] or ())]
        if dynamic:
            raise ctx.fail(f"the shapes of {dynamic} depend on the free input dimensions and this operator "
                           "has no shape rule (nnrt_core/frontends/tflite/shape_rules.py)")
        return [tensors[t].shape if t >= 0 else () for t in outs]
    view = OpView(ctx, in_shapes, in_values, [])
    try:
        derived = [tuple(int(d) for d in s) for s in rule(view)]
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as e:
        raise ctx.fail(f"cannot derive its output shapes from inputs "
                       f"{[None if s is None else list(s) for s in view.shapes]}: {e}") from e
    if len(derived) != len(outs):
        raise ctx.fail(f"it has {len(outs)} outputs; its shape rule gives {len(derived)}")
    for t, s in zip(outs, derived):
        sig = sigs.get(t) if t >= 0 else None
        if t >= 0 and any(d < 0 for d in s):
            raise ctx.fail(f"derived a negative dimension {list(s)} for {tensors[t].desc}")
        if t >= 0 and sig is not None and -1 not in sig and tuple(sig) != s:
            raise ModelLoadError(f"{ctx.desc}: {tensors[t].desc} has the static shape signature {list(sig)}, "
                                 f"but its inputs give {list(s)}")
    return derived


def _input_shapes(tensors: list[TensorInfo], inputs: Sequence[int], sigs: Mapping[int, tuple[int, ...] | None],
                  wanted: Mapping[str, Sequence[int]]) -> dict[int, Shape]:
    """The shape of each graph input: ``wanted`` where given (only free dims may change), else declared."""
    by_name = {tensors[t].name: t for t in inputs}
    unknown = sorted(set(wanted) - set(by_name))
    if unknown:
        raise ConfigError(f"input_shapes names {unknown}, which are no inputs of this TFLite model "
                          f"(inputs: {sorted(by_name)})")
    out = {}
    for name, t in by_name.items():
        declared = tensors[t].shape
        if name not in wanted:
            out[t] = declared
            continue
        shape = tuple(int(d) for d in wanted[name])
        sig = sigs.get(t) or declared
        bad = len(shape) != len(sig) or any(d <= 0 or (s != -1 and d != s) for d, s in zip(shape, sig))
        if bad:
            raise ConfigError(f"input_shapes[{name!r}] = {list(shape)} does not fit the model's input signature "
                              f"{list(sig)} (-1: a free dimension; the others are fixed)")
        out[t] = shape
    return out
