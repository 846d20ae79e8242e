"""Lowering stage 2, capability: which nodes the chip can run, and the reason
when it cannot (op set, constant inputs, ranks, sizes, element types)."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Node, Value
from nnrt_npu_emu.lowering.analysis import FLOAT_DTYPES, Analysis
from nnrt_npu_emu.ops import OPS, OpDef, Unsupported

__all__ = ["why_unsupported"]


def why_unsupported(node: Node, an: Analysis) -> str | None:
    """``None`` when ``node`` can run on the chip, else the reason."""
    p = an.profile
    d = OPS.get(node.op_type)
    if node.domain not in ("", "ai.onnx"):
        return f"domain {node.domain!r} is not supported by the NPU"
    if d is None:
        return f"op {node.op_type} is not in the NPU op set"
    if not p.supports_op(node.op_type):
        return f"chip {p.name!r} does not support op {node.op_type}"
    if id(node) in an.folded:
        try:
            for v in node.outputs:
                an.const(v)
        except Unsupported as e:
            return str(e)
        return None
    if d.fold_only:
        return f"{node.op_type} is supported only as a compile-time constant"
    try:
        data_in = [v for i, v in enumerate(node.inputs) if v is not None and i not in d.const_inputs]
        outs = [v for v in node.outputs if an.live(v)]
        _check_operands(node, an, d, data_in, outs)
        _check_dtypes(node, an, data_in, outs)
        if d.check is not None:
            r = d.check(node, an)
            if r:
                return r
        d.lower(node, an)
    except Unsupported as e:
        return str(e)
    return None


def _check_operands(node: Node, an: Analysis, d: OpDef, data_in: list[Value], outs: list[Value]) -> None:
    """Constant parameters, scalar-only arithmetic, ranks and sizes (raises :class:`Unsupported`)."""
    p = an.profile
    for i in d.const_inputs:
        if i < len(node.inputs) and node.inputs[i] is not None and not an.is_const(node.inputs[i]):
            raise Unsupported(f"input {i} ({node.inputs[i].name!r}) of {node.op_type} must be a compile-time constant")
    live = [v for v in data_in + outs if not an.is_const(v)]
    if live and all(an.shape(v) == () for v in live):
        # e.g. the scale products of dynamically quantized models: fp16 would flush them toward subnormals
        raise Unsupported(f"every operand of {node.op_type} is a scalar (rank 0); scalar arithmetic stays on "
                          "the host")
    for v in data_in + outs:
        shape = an.shape(v)
        if len(shape) > p.max_rank:
            raise Unsupported(f"value {v.name!r} has rank {len(shape)}; chip {p.name!r} supports rank <= {p.max_rank}")
        n = int(np.prod(shape, dtype=np.int64))
        if n == 0:
            raise Unsupported(f"value {v.name!r} is empty; the chip does not support empty tensors")
        if n * 4 > p.device_memory_bytes:
            raise Unsupported(f"value {v.name!r} ({n * 4} bytes) is larger than the device memory of "
                              f"chip {p.name!r} ({p.device_memory_bytes} bytes)")


def _check_dtypes(node: Node, an: Analysis, data_in: list[Value], outs: list[Value]) -> None:
    """Element types the chip computes in (float, or int8 inside Q/DQ groups)."""
    p = an.profile
    op = node.op_type
    if op == "QuantizeLinear":
        if not an.int8:
            raise Unsupported(f"chip {p.name!r} has no int8 support")
        if an.dtype(node.inputs[0]) not in FLOAT_DTYPES:
            raise Unsupported("QuantizeLinear input must be float32/float16")
        return
    if op == "DequantizeLinear":
        if not an.is_const(node.inputs[0]) and not an.int8:
            raise Unsupported(f"chip {p.name!r} has no int8 support")
        return
    in_group = id(node) in an.member
    for v in data_in + outs:
        dt = an.dtype(v)
        if an.is_const(v) and v not in outs:
            continue
        if dt in FLOAT_DTYPES:
            if an.fprec is None and not in_group:
                raise Unsupported(f"chip {p.name!r} computes only in int8 and {op} {node.name!r} is not inside a "
                                  "quantized DequantizeLinear -> op -> QuantizeLinear pattern")
            continue
        raise Unsupported(f"dtype {dt} of {v.name!r} is not supported by chip {p.name!r} "
                          f"(float32/float16{'/int8' if an.int8 else ''})")
