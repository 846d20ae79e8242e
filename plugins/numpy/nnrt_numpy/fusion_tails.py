"""Mobile-network activation tails for :mod:`nnrt_numpy.fusion`: HardSigmoid,
HardSwish, and hard-swish spelled out as ``x * Clip(x + 3, 0, 6) / 6`` (how
PaddlePaddle and many converters export it: Add, Clip, Div and a Mul that
reads the head's output a second time) or as ``x * HardSigmoid(x)``.

Each tail runs in place on the head's fresh output with the same float
operations, in the same order, as the unfused kernels, so results are equal
bit for bit.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnrt_core.ir import Node, Value

from nnrt_numpy.fast_erf import gelu_float32
from nnrt_numpy.graph_facts import value_dtype
from nnrt_numpy.ufuncs import clip

__all__ = ["hard_tail", "match_hardswish", "match_x_hardsigmoid", "apply_hard"]


def _attr(node: Node, name: str, default: float) -> float:
    a = node.attributes.get(name)
    return float(a.value) if a is not None else default


def hard_tail(node: Node, ydt: np.dtype) -> tuple | None:
    """The tail op of a HardSigmoid / HardSwish node (or None)."""
    t = ydt.type
    if node.op_type == "HardSigmoid":
        return ("hsig", t(_attr(node, "alpha", 0.2)), t(_attr(node, "beta", 0.5)))
    if node.op_type == "HardSwish" and node.opset >= 14:
        return ("hswish", t(1 / 6), t(0.5))
    return None


def _scalar(v: Value | None) -> float | None:
    if v is None or v.const is None or v.const.size != 1:
        return None
    return float(v.const.reshape(()))


def _clip_bounds(node: Node) -> tuple[float | None, float | None]:
    if node.opset < 11:
        lo, hi = node.attributes.get("min"), node.attributes.get("max")
        return (None if lo is None else float(lo.value)), (None if hi is None else float(hi.value))
    vals = [_scalar(v) if v is not None and v.name else None for v in list(node.inputs[1:3]) + [None, None]]
    return vals[0], vals[1]


def match_hardswish(y: Value, readers: dict[int, list],
                    same: Callable[[Value], bool]) -> tuple[list[Node], tuple] | None:
    """``y``'s readers (``readers``: :func:`nnrt_numpy.graph_facts.value_readers`) forming
    ``Mul(y, Div(Clip(Add(y, 3), 0, 6), 6))`` or ``Div(Mul(y, Clip(Add(y, 3), 0, 6)), 6)`` (a Mul by a
    constant instead of the Div too), every intermediate read once and like ``y`` (``same``): the
    nodes after the head, in graph order, and the tail op."""
    users = readers.get(id(y), [])
    if len(users) != 2 or any(u is None or u.domain not in ("", "ai.onnx") for u in users):
        return None
    add = next((u for u in users if u.op_type == "Add"), None)
    mul = next((u for u in users if u.op_type == "Mul" and u is not add), None)
    if add is None or mul is None or len(add.inputs) != 2 or len(mul.inputs) != 2 or add.opset < 7:
        return None
    other = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
    if _scalar(other) != 3.0 or not same(add.outputs[0]):
        return None
    clip = _only_reader(readers, add.outputs[0])
    if clip is None or clip.op_type != "Clip" or clip.inputs[0] is not add.outputs[0] or not same(clip.outputs[0]):
        return None
    if _clip_bounds(clip) != (0.0, 6.0):
        return None
    nxt = _only_reader(readers, clip.outputs[0])
    if nxt is mul:  # y * clip, then / 6
        scale, first = _only_reader(readers, mul.outputs[0]), True
    else:  # clip / 6, then y *
        scale, first = nxt, False
    if scale is None or scale.op_type not in ("Div", "Mul") or len(scale.inputs) != 2:
        return None
    k = _scalar(scale.inputs[1])
    src = mul.outputs[0] if first else clip.outputs[0]
    if k is None or scale.inputs[0] is not src or not same(scale.outputs[0]) or not same(mul.outputs[0]):
        return None
    if {id(v) for v in mul.inputs} != {id(y), id(clip.outputs[0] if first else scale.outputs[0])}:
        return None
    if not first and _only_reader(readers, scale.outputs[0]) is not mul:
        return None
    nodes = [add, clip, mul, scale] if first else [add, clip, scale, mul]
    return nodes, ("hswish3", scale.op_type == "Div", k, first)


def match_x_hardsigmoid(y: Value, readers: dict[int, list],
                        same: Callable[[Value], bool]) -> tuple[list[Node], tuple] | None:
    """``y``'s two readers forming ``Mul(y, HardSigmoid(y))`` (hard-swish with HardSigmoid's alpha
    and beta: how some converters export it), the HardSigmoid's output read once: the nodes after
    the head, in graph order, and the ``hswish`` tail op (the same float operations as the two
    kernels: ``y * clip(y * alpha + beta, 0, 1)``)."""
    users = readers.get(id(y), [])
    if len(users) != 2 or any(u is None or u.domain not in ("", "ai.onnx") for u in users):
        return None
    hs = next((u for u in users if u.op_type == "HardSigmoid"), None)
    mul = next((u for u in users if u.op_type == "Mul"), None)
    if hs is None or mul is None or mul.opset < 7 or len(mul.inputs) != 2 or hs.inputs[0] is not y:
        return None
    if {id(v) for v in mul.inputs} != {id(y), id(hs.outputs[0])} or _only_reader(readers, hs.outputs[0]) is not mul:
        return None
    if not same(hs.outputs[0]) or not same(mul.outputs[0]):
        return None
    t = hard_tail(hs, value_dtype(hs.outputs[0]))  # same(): the head's float dtype
    return [hs, mul], ("hswish", t[1], t[2])


def _only_reader(readers: dict[int, list], v: Value) -> Node | None:
    users = readers.get(id(v), [])
    return users[0] if len(users) == 1 else None


def apply_hard(op: tuple, y: np.ndarray) -> None:
    """Run a tail made here (or the ``gelu`` tail of :mod:`nnrt_numpy.fusion_gelu`) on ``y`` in place."""
    kind = op[0]
    t = y.dtype.type
    if kind == "gelu":  # float32 only (nnrt_numpy.fusion_gelu)
        gelu_float32(y, out=y)
    elif kind == "hsig":  # as the HardSigmoid kernel: clip(x * alpha + beta, 0, 1)
        np.multiply(y, op[1], out=y)
        np.add(y, op[2], out=y)
        clip(y, t(0), t(1), out=y)
    elif kind == "hswish":  # as the HardSwish kernel: x * clip(x * (1/6) + 0.5, 0, 1)
        g = np.multiply(y, op[1])
        np.add(g, op[2], out=g)
        clip(g, t(0), t(1), out=g)
        np.multiply(y, g, out=y)
    else:  # hswish3: Add, Clip, then Mul by x and Div (or Mul) by the constant, in the graph's order
        g = np.add(y, t(3))
        clip(g, t(0), t(6), out=g)
        scale = np.divide if op[1] else np.multiply
        if op[3]:
            np.multiply(y, g, out=y)
            scale(y, t(op[2]), out=y)
        else:
            scale(g, t(op[2]), out=g)
            np.multiply(y, g, out=y)

