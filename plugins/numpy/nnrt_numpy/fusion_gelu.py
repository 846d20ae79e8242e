"""Exact GELU spelled out as ``Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)`` (how PyTorch and
PaddlePaddle export ``nn.GELU``; PP-OCRv5/v6, ViT and BERT-style blocks) as one tail of a
:mod:`nnrt_numpy.fusion` chain: :func:`nnrt_numpy.fast_erf.gelu_float32` in place, 17 float32
passes and a tanh instead of five steps (Div, Erf, Add, Mul, Mul).

Matched for float32 only, every intermediate read once (not a graph output) and of the head's
shape; the constants are scalars (``sqrt 2`` as a Div or ``1 / sqrt 2`` as a Mul, to float32
rounding; ``1``; ``0.5``), and the three Mul orders ``(x * a) * 0.5``, ``x * (a * 0.5)`` and
``(x * 0.5) * a`` are taken.  Results agree with the unfused nodes to float32 rounding (below
1e-6 absolute, 3e-7 x max(|x|, 1) against the exact function; ``tests/test_fast_erf.py``).
"""
from __future__ import annotations

import math
from typing import Callable

from nnrt_core.ir import Node, Value

__all__ = ["match_gelu"]

_ROOT2 = math.sqrt(2.0)


def _scalar(v: Value | None) -> float | None:
    if v is None or v.const is None or v.const.size != 1 or v.const.dtype.kind != "f":
        return None
    return float(v.const.reshape(()))


def _only_reader(readers: dict[int, list], v: Value) -> Node | None:
    users = readers.get(id(v), [])
    return users[0] if len(users) == 1 and users[0] is not None else None


def _near(a: float | None, b: float) -> bool:
    return a is not None and abs(a - b) <= 1e-6 * b


def _other(node: Node, v: Value) -> Value | None:
    """The other input of a binary ``node`` reading ``v`` (None when it is not binary or reads ``v`` twice)."""
    if len(node.inputs) != 2 or node.inputs[0] is node.inputs[1]:
        return None
    return node.inputs[1] if node.inputs[0] is v else node.inputs[0] if node.inputs[1] is v else None


def _is(node: Node | None, op: str) -> bool:
    return node is not None and node.op_type == op and node.domain in ("", "ai.onnx") and len(node.outputs) == 1


def _scale(node: Node, y: Value) -> bool:
    """``node`` is ``y / sqrt 2`` or ``y * (1 / sqrt 2)``."""
    if _is(node, "Div"):
        return node.inputs[0] is y and len(node.inputs) == 2 and _near(_scalar(node.inputs[1]), _ROOT2)
    return _is(node, "Mul") and _near(_scalar(_other(node, y)), 1 / _ROOT2)


def match_gelu(y: Value, readers: dict[int, list], same: Callable[[Value], bool]) -> tuple[list[Node], tuple] | None:
    """``y``'s two readers forming the exact GELU above (``readers``:
    :func:`nnrt_numpy.graph_facts.value_readers`; ``same``: a value is float32 of ``y``'s
    shape): the nodes after the head (the last one writes the result) and the tail op."""
    users = readers.get(id(y), [])
    if len(users) != 2 or any(u is None for u in users) or users[0] is users[1]:
        return None
    div = next((u for u in users if _scale(u, y)), None)
    if div is None:
        return None
    mx = users[1] if users[0] is div else users[0]  # the Mul reading y
    erf = _only_reader(readers, div.outputs[0])
    if not _is(erf, "Erf") or not same(div.outputs[0]) or not same(erf.outputs[0]):
        return None
    add = _only_reader(readers, erf.outputs[0])
    if not _is(add, "Add") or add.opset < 7 or _scalar(_other(add, erf.outputs[0])) != 1.0 or not same(add.outputs[0]):
        return None
    a = add.outputs[0]
    m1 = _only_reader(readers, a)
    if not _is(m1, "Mul") or not _is(mx, "Mul") or not same(m1.outputs[0]) or not same(mx.outputs[0]):
        return None
    other = _other(m1, a)
    if other is None:
        return None
    if other is y and m1 is mx:  # (x * a) * 0.5
        m2 = _only_reader(readers, m1.outputs[0])
        ok = _is(m2, "Mul") and _scalar(_other(m2, m1.outputs[0])) == 0.5
        nodes = [div, erf, add, m1, m2]
    elif _scalar(other) == 0.5:  # x * (a * 0.5)
        m2 = _only_reader(readers, m1.outputs[0])
        ok = m2 is mx and _other(m2, y) is m1.outputs[0]
        nodes = [div, erf, add, m1, m2]
    else:  # (x * 0.5) * a
        ok = other is mx.outputs[0] and _scalar(_other(mx, y)) == 0.5 and _only_reader(readers, other) is m1
        nodes = [div, erf, add, mx, m1]
    if not ok or not same(nodes[-1].outputs[0]):
        return None
    return nodes, ("gelu",)
