"""Comparisons, boolean logic, NaN tests and selection: the cheap ops of
attention masks and NaN guards (``Where(IsNaN(softmax), 0, softmax)``).

Every one of them is exact on the chip: a comparison reads the stored
(fp16 or fp32) values and writes booleans, ``And``/``Or``/``Xor``/``Not``
work on booleans, ``IsNaN`` tests the stored values (an fp16 store keeps
NaN a NaN) and ``Where`` selects stored values, so no result is rounded.
Operands may be booleans or integers (``Equal(attention_mask, 0)``) besides
floats (:attr:`OpDef.exact_dtypes`).  ``IsInf`` runs only where floats are
fp32: the chip's fp16 stores saturate infinities to +-65504."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Node
from nnrt_npu_emu.ops.common import Step, Unsupported, kernel, op, store

__all__ = ["COMPARISONS", "LOGICAL"]

#: op -> numpy comparison
COMPARISONS = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
               "GreaterOrEqual": np.greater_equal}
#: op -> numpy boolean function
LOGICAL = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}
_FUNCS = {**COMPARISONS, **LOGICAL}


def _elements(node: Node, cx) -> int:
    return max(int(np.prod(cx.shape(node.outputs[0]))), 1)


def _check_bool_inputs(node: Node, cx) -> str | None:
    for v in node.inputs:
        if v is not None and cx.dtype(v) != np.bool_:
            return f"{node.op_type} needs boolean inputs, got {cx.dtype(v)} for {v.name!r}"
    return None


def _lower_binary(name: str):
    def lower(node: Node, cx) -> list[Step]:
        if len(node.inputs) != 2 or any(v is None for v in node.inputs):
            raise Unsupported(f"{name} needs two inputs")
        return [Step("compare", list(node.inputs), [node.outputs[0]], {"fn": name}, _elements(node, cx))]
    return lower


for _name in COMPARISONS:
    op(_name, int8="none", exact_dtypes="any")(_lower_binary(_name))
for _name in LOGICAL:
    op(_name, int8="none", exact_dtypes="any", check=_check_bool_inputs)(_lower_binary(_name))


@kernel("compare")
def _k_compare(ins, outs, a):
    a_, b_ = ins
    if a_.dtype.kind == "f" and b_.dtype.kind == "f" and a_.dtype != b_.dtype:
        a_, b_ = a_.astype(np.float32), b_.astype(np.float32)  # fp16 values widen exactly
    _FUNCS[a["fn"]](a_, b_, out=outs[0])


@op("Not", int8="none", exact_dtypes="any", check=_check_bool_inputs)
def _lower_not(node: Node, cx) -> list[Step]:
    return [Step("logical_not", [node.inputs[0]], [node.outputs[0]], {}, _elements(node, cx))]


@kernel("logical_not")
def _k_not(ins, outs, a):
    np.logical_not(ins[0], out=outs[0])


def _check_float_input(node: Node, cx) -> str | None:
    dt = cx.dtype(node.inputs[0])
    if dt.kind != "f":
        return f"{node.op_type} input {node.inputs[0].name!r} is {dt}, not a float"
    if node.op_type == "IsInf" and cx.precision == "fp16":
        return "IsInf cannot see infinities on an fp16 chip: its stores saturate them to +-65504"
    return None


@op("IsNaN", int8="none", exact_dtypes="any", check=_check_float_input)
def _lower_isnan(node: Node, cx) -> list[Step]:
    return [Step("isnan", [node.inputs[0]], [node.outputs[0]], {}, _elements(node, cx))]


@kernel("isnan")
def _k_isnan(ins, outs, a):
    np.isnan(ins[0], out=outs[0])


@op("IsInf", int8="none", exact_dtypes="any", check=_check_float_input)
def _lower_isinf(node: Node, cx) -> list[Step]:
    attrs = {"neg": bool(node.attr("detect_negative", 1)), "pos": bool(node.attr("detect_positive", 1))}
    return [Step("isinf", [node.inputs[0]], [node.outputs[0]], attrs, _elements(node, cx))]


@kernel("isinf")
def _k_isinf(ins, outs, a):
    x = ins[0]
    if a["neg"] and a["pos"]:
        np.isinf(x, out=outs[0])
    else:
        store(outs[0], np.isneginf(x) if a["neg"] else np.isposinf(x) if a["pos"] else np.zeros(x.shape, bool))


def _check_where(node: Node, cx) -> str | None:
    if len(node.inputs) != 3 or any(v is None for v in node.inputs):
        return "Where needs three inputs"
    if cx.dtype(node.inputs[0]) != np.bool_:
        return f"Where condition {node.inputs[0].name!r} is {cx.dtype(node.inputs[0])}, not bool"
    kinds = {cx.dtype(v).kind for v in node.inputs[1:]}
    if len(kinds) != 1:
        return f"Where branches of different kinds ({sorted(kinds)})"
    return None


@op("Where", int8="none", exact_dtypes="any", check=_check_where)
def _lower_where(node: Node, cx) -> list[Step]:
    return [Step("where", list(node.inputs), [node.outputs[0]], {}, _elements(node, cx))]


@kernel("where", exact=True)
def _k_where(ins, outs, a):
    cond, x, y = ins
    if cond.dtype != np.bool_:  # a boolean constant in the weights blob is stored as uint8
        cond = cond != 0
    store(outs[0], np.where(cond, x, y))
