"""The dequantizing tail of a dynamic-int8 MatMul as one step.

``onnxruntime.quantization.quantize_dynamic`` writes every quantized MatMul
as ``DynamicQuantizeLinear -> MatMulInteger -> Cast(to=FLOAT) -> Mul(scale)``
(then usually ``Add(bias)``), the scale being ``a_scale * b_scale`` computed by
another Mul.  :func:`match_int_head` finds ``MatMulInteger`` (with constant
``B``: its kernel holds the float32 weights) ``-> Cast -> Mul`` where each
intermediate has that one reader; :class:`ScaledIntProduct` runs the three
as the head of a fused chain (:mod:`nnrt_numpy.fusion`), so the bias Add and
any other tail follow in place on the same array.

Bit-exact with the unfused nodes: the exact integer products
(:meth:`MatMulInteger.accumulate`) are converted to float32 once, straight
from float32 / float64 (the same round-to-nearest-even as int32 -> float32,
since every sum is an integer below 2**31 in magnitude; a larger one, which
int32 would wrap, goes through int32 as the unfused nodes do) and multiplied
by the same float32 scale, in place.  This saves the int32 array, the Cast's
float32 copy and the Mul's output, and two steps.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from nnrt_core.ir import Node, Value

from nnrt_numpy.fusion_shapes import known_shape
from nnrt_numpy.graph_facts import value_dtype
from nnrt_numpy.kernel import Kernel

__all__ = ["match_int_head", "ScaledIntProduct"]

_ONNX = ("", "ai.onnx")
_FLOAT = 1  # TensorProto.FLOAT
_INT32_LIMIT = float(2**31)


class ScaledIntProduct:
    """``float32((A - a_zp) @ (B - b_zp)) * scale``: MatMulInteger, Cast and Mul in one."""

    __slots__ = ("kernel", "_dequantized")

    def __init__(self, kernel: Kernel) -> None:
        from nnrt_numpy.ops.quant._imatmul import dequantized  # (kernel modules load on use)

        self.kernel = kernel
        self._dequantized = dequantized

    def __call__(self, a: Any, b: Any, a_zp: Any, b_zp: Any, scale: Any) -> tuple[np.ndarray]:
        acc = self.kernel.accumulate(a, b, a_zp, b_zp)  # type: ignore[attr-defined]
        if acc.dtype == np.float32:
            y = acc  # exact integers (exact_product's bound), a fresh array
        elif acc.dtype == np.float64 and float(np.abs(acc).max(initial=0)) < _INT32_LIMIT:
            y = acc.astype(np.float32)
        else:  # int64, or sums int32 wraps: the unfused nodes' conversions
            y = acc.astype(np.int32).astype(np.float32)
        return (self._dequantized(y, scale),)


def _only_reader(v: Value, readers: dict[int, list], index: dict[int, int], after: Node) -> Node | None:
    users = readers.get(id(v), [])
    if len(users) != 1 or users[0] is None:
        return None
    nxt = users[0]
    if index.get(id(nxt), -1) <= index[id(after)]:
        return None
    return nxt


def match_int_head(head: Node, kernel: Kernel, readers: dict[int, list],
                   index: dict[int, int]) -> tuple[list[Node], list[Value | None], Callable] | None:
    """``([MatMulInteger, Cast, Mul], inputs, head)`` when ``head`` starts that
    pattern (inputs: the MatMulInteger's four, then the scale), else None."""
    if head.op_type != "MatMulInteger" or head.domain not in _ONNX or len(head.outputs) != 1:
        return None
    if getattr(kernel, "weights", None) is None or not hasattr(kernel, "accumulate"):
        return None  # B not constant: the plain kernels
    cast = _only_reader(head.outputs[0], readers, index, head)
    if cast is None or cast.op_type != "Cast" or cast.domain not in _ONNX or len(cast.outputs) != 1:
        return None
    to = cast.attributes.get("to")
    if to is None or int(to.value) != _FLOAT:
        return None
    mul = _only_reader(cast.outputs[0], readers, index, cast)
    if mul is None or mul.op_type != "Mul" or mul.domain not in _ONNX or len(mul.inputs) != 2 \
            or len(mul.outputs) != 1 or mul.opset < 7:
        return None
    y = cast.outputs[0]
    if mul.inputs[0] is y and mul.inputs[1] is y:
        return None
    scale = mul.inputs[1] if mul.inputs[0] is y else mul.inputs[0]
    if scale is None or value_dtype(scale) != np.float32 or value_dtype(mul.outputs[0]) != np.float32:
        return None
    if not known_shape(mul.outputs[0].shape):
        return None  # (the tails need the declared shape)
    inputs: list[Value | None] = list(head.inputs) + [None] * (4 - len(head.inputs))
    return [head, cast, mul], inputs + [scale], ScaledIntProduct(kernel)
