"""Declared shapes of a static TFLite model, checked against its operators.

A model without free input dimensions keeps the shapes its tensors declare
(``dynamic.py`` re-derives them only for free dimensions).  A corrupted
intermediate shape (a hostile or broken file) then reached the backends,
which computed with the real shapes and failed at run (the NPU emulator's
"cannot reshape", "store epilogue needs the output array") or, for a
same-size shape, returned values laid out wrongly.  :func:`check_declared_shapes`
derives each operator's output shapes from its declared input shapes with the
rules of ``shape_rules.py`` (as LiteRT's ``Prepare`` would) and refuses the
model, naming the operator and the tensor, when a declared output shape
disagrees.  Operators without a rule, or whose rule needs a value computed at
run time, are left to their mappers."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnrt_core.errors import ModelLoadError, NnrtError
from nnrt_core.frontends.tflite.context import OperatorRef
from nnrt_core.frontends.tflite.schema import GUARDED_ERRORS, FlatModel, TensorInfo, corrupt
from nnrt_core.frontends.tflite.shape_rules import RULES, OpView
from nnrt_core.frontends.tflite.table import OPERATOR, Table

__all__ = ["check_declared_shapes"]

_RULE_ERRORS = (NnrtError, TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError)


def check_declared_shapes(flat: FlatModel, sg: Table, tensors: list[TensorInfo]) -> None:
    """:class:`ModelLoadError` for the first operator of ``sg`` whose declared
    output shape is not the one its declared inputs give."""
    names, io = flat.op_names(sg), flat.operator_io(sg)
    n = len(tensors)
    for k, op in enumerate(flat.operators(sg)):
        name = names[k][0]
        rule = RULES.get(name)
        if rule is None:
            continue
        try:
            ins, outs = (op.i32s(OPERATOR.inputs), op.i32s(OPERATOR.outputs)) if io is None else io[k]
        except GUARDED_ERRORS as e:
            raise corrupt(f"operator {k}", e) from e
        if any(not -1 <= t < n for t in (*ins, *outs)):
            continue  # the mapper names the bad index
        _check_op(OperatorRef(op, k, name), rule, tensors, ins, outs)


def _check_op(ctx: OperatorRef, rule, tensors: list[TensorInfo], ins: Sequence[int], outs: Sequence[int]) -> None:
    shapes = [tensors[t].shape if t >= 0 else None for t in ins]
    values = [_int_value(tensors[t]) if t >= 0 else None for t in ins]
    try:
        derived = [tuple(int(d) for d in s) for s in rule(OpView(ctx, shapes, values, []))]
    except _RULE_ERRORS:
        return  # a value known only at run time, or a problem the mapper reports in its own words
    for t, s in zip(outs, derived):
        if t >= 0 and tuple(tensors[t].shape) != s:
            raise ModelLoadError(f"{ctx.desc}: {tensors[t].desc} declares shape {list(tensors[t].shape)}, but the "
                                 f"operator's inputs {[None if x is None else list(x) for x in shapes]} give "
                                 f"{list(s)} (a corrupted shape in the file)")


def _int_value(info: TensorInfo) -> np.ndarray | None:
    """A constant integer tensor's values (shape arguments), else ``None``."""
    if info.data is None or info.sparse is not None or info.dtype.numpy.kind not in "iu":
        return None
    return info.data
