"""QuantizeLinear / DequantizeLinear, and ``qgeneric``: the dequantize ->
float kernel -> requantize form of int8 groups without an integer kernel
(see :mod:`.int8` for those)."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Node
from nnrt_npu_emu.numerics import dequantize, qparams_shape, quantize
from nnrt_npu_emu.ops.common import KERNELS, Step, Unsupported, kernel, op, store

__all__ = ["qparams"]

_QTYPES = (np.dtype(np.int8), np.dtype(np.uint8))


def qparams(node: Node, cx, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(scale fp32, zero point int32), broadcastable to a rank-``rank`` tensor."""
    if node.attr("block_size", 0):
        raise Unsupported("blocked quantization is not supported")
    s = cx.const(node.inputs[1])
    if s is None:
        raise Unsupported(f"{node.op_type} scale must be a compile-time constant")
    z = None
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        z = cx.const(node.inputs[2])
        if z is None:
            raise Unsupported(f"{node.op_type} zero point must be a compile-time constant")
    if z is None:
        z = np.zeros_like(s, dtype=np.int32)
    axis = int(node.attr("axis", 1))
    s = qparams_shape(s.astype(np.float32), rank, axis)
    z = qparams_shape(z.astype(np.int32), rank, axis)
    return s, z


def _check_q(node: Node, cx) -> str | None:
    dt = node.outputs[0].dtype
    if dt is None or dt.numpy not in _QTYPES:
        return f"QuantizeLinear to {dt.name if dt else '?'} is not supported (int8/uint8 only)"
    return None


@op("QuantizeLinear", check=_check_q, const_inputs=(1, 2), int8="none")
def _lower_q(node: Node, cx) -> list[Step]:
    s, z = qparams(node, cx, len(cx.shape(node.inputs[0])))
    return [Step("quantize", [node.inputs[0], s, z], [node.outputs[0]], {}, int(np.prod(cx.shape(node.inputs[0]))))]


def _check_dq(node: Node, cx) -> str | None:
    dt = node.inputs[0].dtype
    ok = _QTYPES + ((np.dtype(np.int32),) if cx.is_const(node.inputs[0]) else ())
    if dt is None or dt.numpy not in ok:
        return f"DequantizeLinear from {dt.name if dt else '?'} is not supported (int8/uint8 only)"
    return None


@op("DequantizeLinear", check=_check_dq, const_inputs=(1, 2), int8="none")
def _lower_dq(node: Node, cx) -> list[Step]:
    s, z = qparams(node, cx, len(cx.shape(node.inputs[0])))
    return [Step("dequantize", [node.inputs[0], s, z], [node.outputs[0]], {}, int(np.prod(cx.shape(node.inputs[0]))))]


@kernel("quantize")
def _k_quantize(ins, outs, a):
    store(outs[0], quantize(ins[0], ins[1], ins[2], outs[0].dtype))


@kernel("dequantize")
def _k_dequantize(ins, outs, a):
    store(outs[0], dequantize(ins[0], ins[1], ins[2]))


# ------------------------------------------------------------- int8 groups
def _act(y: np.ndarray, act: dict | None) -> np.ndarray:
    if not act:
        return y
    lo, hi = act.get("min"), act.get("max")
    if lo is not None:
        y = np.maximum(y, lo)
    if hi is not None:
        y = np.minimum(y, hi)
    return y


@kernel("qgeneric")
def _k_qgeneric(ins, outs, a):
    """Dequantize -> fp32 inner kernel -> requantize: how the chip runs ops
    whose int8 form is a lookup table or an internal high-precision stage."""
    n_out = len(outs)
    args, i = [], 0
    for quantized in a["qin"]:
        if quantized is None:
            args.append(None)
        elif quantized:
            args.append(dequantize(ins[i], ins[i + 1], ins[i + 2]))
            i += 3
        else:
            args.append(ins[i])
            i += 1
    tmp = [np.empty(o.shape, np.float32) for o in outs]
    KERNELS[a["inner"]](args, tmp, a["inner_attrs"])
    for k in range(n_out):
        y = _act(tmp[k], a.get("act"))
        store(outs[k], quantize(y, ins[i + 2 * k], ins[i + 2 * k + 1], outs[k].dtype))
