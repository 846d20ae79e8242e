"""Lowering stage 2, capability: which nodes the chip can run, and the reason
when it cannot (op set, constant inputs, ranks, sizes, element types)."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Node, Value
from nnrt_core.ir.shape_values import computes_in_float
from nnrt_npu_emu.lowering.analysis import FLOAT_DTYPES, Analysis
from nnrt_npu_emu.numerics import FP16_MAX, fp16_unsafe_value
from nnrt_npu_emu.ops import OPS, OpDef, Unsupported

__all__ = ["why_unsupported", "quantized_range", "exact_in_fp32"]


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
    q = an.dynamic_quant_inputs.get(id(node))
    if q is not None:
        # a folded constant too: the chip would hold it in fp16
        return (f"feeds DynamicQuantizeLinear {q!r}: dynamic quantization takes its scale from the data, and fp16 "
                "rounding upstream moves its int8 steps (kept for an fp32 backend)")
    if an.exact_only and not exact_in_fp32(node, an):
        return _not_fp32_reason(node, an)
    if id(node) in an.folded:
        try:
            for v in node.outputs:
                an.const(v)
        except Unsupported as e:
            return str(e)
        return None
    if d.fold_only:
        return f"{node.op_type} is supported only as a compile-time constant"
    shaped = an.shape_values.get(id(node))
    if shaped is not None and computes_in_float(node):
        # folded nodes (above) are computed in fp32 at compile time: exact
        return (f"computes a value that becomes a shape ({shaped}): fp16 could change the output's shape "
                "(e.g. a Floor of a duration one step lower), so it is kept exact for an fp32 backend")
    try:
        data_in = [v for i, v in enumerate(node.inputs) if v is not None and i not in d.const_inputs]
        outs = [v for v in node.outputs if an.live(v)]
        _check_operands(node, an, d, data_in, outs)
        _check_dtypes(node, an, data_in, outs)
        _check_fp16_range(node, an, outs)
        _check_wide_integer_inputs(node, an, data_in)
        _check_fp16_constants(node, an)
        if d.check is not None:
            r = d.check(node, an)
            if r:
                return r
        d.lower(node, an)
    except Unsupported as e:
        return str(e)
    return None


def exact_in_fp32(node: Node, an: Analysis) -> bool:
    """True when the chip computes ``node`` bit-exactly as fp32 would, whatever
    its float type.  That is so when the node is folded at compile time (in
    fp32) into non-float constants (shape math); when it reads and writes no
    float value (comparisons, boolean logic, ``Not``, ``Where`` and data
    movement of booleans and integers, which the chip holds natively); and for
    a Cast from a boolean to an integer, from an integer to a boolean, or from
    a boolean/int8/uint8 to a float (fp16 holds every such value exactly).  A
    float operand anywhere makes a node inexact: ``Less(x, 0.5)`` of an fp32
    ``x`` compares the fp16 rounding of ``x``, a float ``Reshape`` stores fp16,
    a float constant is stored in fp16, int8 groups requantize."""
    ins = [v for v in node.inputs if v is not None]
    outs = [v for v in node.outputs if an.live(v)]
    try:
        if id(node) in an.folded:  # computed at compile time in fp32 (a Shape reads no values): its results count
            return all(an.dtype(v).kind != "f" for v in outs)
        if node.op_type == "Cast":
            return bool(ins) and an.dtype(ins[0]).kind != "f" and _exact_cast(node, an)
        d = OPS.get(node.op_type)
        if d is None or not d.exact_dtypes:
            return False
        return all(an.dtype(v).kind != "f" for v in ins + outs)
    except Unsupported:  # an unknown element type: not provably exact
        return False


def _not_fp32_reason(node: Node, an: Analysis) -> str:
    """Why ``node`` is declined under ``precision="fp32"`` on a chip without fp32."""
    p = an.profile
    if an.fprec is not None:
        got, ask = f"computes floats in {an.fprec} only", f"precision={an.fprec!r}"
    else:
        got, ask = "computes only in int8 (quantized DequantizeLinear -> op -> QuantizeLinear patterns)", \
            "precision='int8'"
    return (f"precision 'fp32' was asked and chip {p.name!r} {got}, not fp32: {node.op_type} reads or writes float "
            f"values it would not compute exactly (it runs on the NPU with {ask} or 'auto')")


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
    folded = _folded_rank(node, an)
    if folded is not None and folded > p.max_rank:
        raise Unsupported(f"{node.op_type} needs a rank-{folded} data movement after folding its axes; chip "
                          f"{p.name!r} supports rank <= {p.max_rank}")
    for v in data_in + outs:
        shape = an.shape(v)
        if folded is None and len(shape) > p.max_rank:
            raise Unsupported(f"value {v.name!r} has rank {len(shape)}; chip {p.name!r} supports rank <= {p.max_rank}")
        n = int(np.prod(shape, dtype=np.int64))
        if n == 0:
            raise Unsupported(f"value {v.name!r} is empty; the chip does not support empty tensors")
        if n * 4 > p.device_memory_bytes:
            raise Unsupported(f"value {v.name!r} ({n * 4} bytes) is larger than the device memory of "
                              f"chip {p.name!r} ({p.device_memory_bytes} bytes)")


def _folded_rank(node: Node, an: Analysis) -> int | None:
    """The rank of the data movement ``node`` lowers to, when its axes fold
    (:attr:`OpDef.device_rank`): also for the QuantizeLinear of such an int8
    group and a DequantizeLinear read only by such groups (they become that
    one instruction).  ``None``: every tensor's own rank counts."""
    d = OPS[node.op_type]
    if d.device_rank is not None:
        return d.device_rank(node, an)
    grp = an.member.get(id(node))
    if grp is not None and grp.head is not node:
        return _folded_rank(grp.head, an) if OPS[grp.head.op_type].device_rank is not None else None
    if node.op_type == "DequantizeLinear" and id(node.outputs[0]) not in an.graph_output_ids:
        heads = node.outputs[0].consumers()
        if heads and all(id(u) in an.groups and OPS[u.op_type].device_rank is not None for u in heads):
            return max(_folded_rank(u, an) for u in heads)
    return None


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
    exact = "any" if op == "Cast" and _exact_cast(node, an) else OPS[op].exact_dtypes
    for v in data_in + outs:
        dt = an.dtype(v)
        if an.is_const(v) and v not in outs:
            continue
        if exact == "any" and (dt.kind == "b" or dt in _CHIP_INTS) or exact == "bool" and dt.kind == "b":
            continue
        if dt in FLOAT_DTYPES:
            if an.fprec is None and not in_group:
                raise Unsupported(f"chip {p.name!r} computes only in int8 and {op} {node.name!r} is not inside a "
                                  "quantized DequantizeLinear -> op -> QuantizeLinear pattern")
            continue
        raise Unsupported(f"dtype {dt} of {v.name!r} is not supported by chip {p.name!r} "
                          f"(float32/float16{'/int8' if an.int8 else ''})")


#: integer types the chip holds (exact ops may read and write them)
_CHIP_INTS = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int32, np.int64))
#: integer types whose every value an fp16 store holds exactly (|x| <= 2048)
_FP16_EXACT_INTS = (np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.uint8))


def _exact_cast(node: Node, an: Analysis) -> bool:
    """A Cast the chip computes exactly: to or from booleans, or from an
    integer type every value of which the float storage holds (int8/uint8 in
    fp16).  A wider integer (an int32 accumulator, an int64 id) could be
    rounded or saturated by an fp16 store; float -> integer truncates values
    already rounded to fp16."""
    src, dst = an.dtype(node.inputs[0]), an.dtype(node.outputs[0])
    if dst == np.bool_ or src == np.bool_ and dst.kind in "fbiu":
        return True
    return dst.kind == "f" and (src in _FP16_EXACT_INTS or src.kind in "iu" and an.precision == "fp32"
                                and src.itemsize <= 2)


def quantized_range(q: Node, an: Analysis) -> float | None:
    """The largest magnitude the QuantizeLinear/DequantizeLinear ``q`` represents
    (its scale times the farthest integer from the zero point); ``None`` when unknown."""
    s = an.const(q.inputs[1]) if len(q.inputs) > 1 else None
    if s is None:
        return None
    z = an.const(q.inputs[2]) if len(q.inputs) > 2 and q.inputs[2] is not None else None
    qv = q.outputs[0] if q.op_type == "QuantizeLinear" else q.inputs[0]
    try:
        info = np.iinfo(an.dtype(qv))
    except (Unsupported, ValueError):
        return None
    z64 = np.zeros(1) if z is None else np.asarray(z, np.float64).reshape(-1)
    span = np.maximum(info.max - z64, z64 - info.min)
    return float(np.max(np.abs(np.asarray(s, np.float64).reshape(-1)) * span))


#: ops whose output magnitude bounds their input's (seen through when looking for the QuantizeLinear of a value)
_RANGE_PRESERVING = frozenset({"Relu", "Clip", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"})


def _quantizers(v: Value, depth: int = 4) -> list[Node]:
    """The QuantizeLinear nodes reading ``v``, directly or through range-preserving ops."""
    found: list[Node] = []
    for u in v.consumers():
        if u.op_type == "QuantizeLinear":
            found.append(u)
        elif u.op_type in _RANGE_PRESERVING and depth > 0 and u.outputs:
            found += _quantizers(u.outputs[0], depth - 1)
    return found


def _check_fp16_range(node: Node, an: Analysis, outs: list[Value]) -> None:
    """On an fp16 chip, refuse float ops whose values a Q/DQ pair says exceed
    fp16 (the chip's stores would saturate them at 65504, e.g. the logits of
    untrained models around 1e10): they stay on the host in fp32."""
    if an.fprec != "fp16" or id(node) in an.member:
        return
    if node.op_type == "DequantizeLinear":
        ranges = [(node.outputs[0], quantized_range(node, an))]
    else:
        ranges = [(v, quantized_range(q, an)) for v in outs for q in _quantizers(v)]
    for v, r in ranges:
        if r is not None and r > FP16_MAX:
            raise Unsupported(f"value {v.name!r} is quantized to a range of +-{r:.3g}, beyond fp16 (+-{FP16_MAX:g}); "
                              "the chip would saturate it")


#: ops that move or re-label values without changing them (seen through when looking for a value's source)
_MOVES = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Slice",
                    "Gather", "Concat"})


def _wide_integer_source(v: Value, an: Analysis, depth: int = 4) -> Value | None:
    """The int32/int64 value ``v`` is the float Cast of (through data
    movement), or ``None``."""
    p = v.producer
    if p is None or p.domain not in ("", "ai.onnx"):
        return None
    if p.op_type == "Cast" and p.inputs and p.inputs[0] is not None:
        src = p.inputs[0]
        try:
            return src if an.dtype(src) in (np.dtype(np.int32), np.dtype(np.int64)) and not an.is_const(src) else None
        except Unsupported:
            return None
    if p.op_type in _MOVES and depth > 0 and p.inputs and p.inputs[0] is not None:
        return _wide_integer_source(p.inputs[0], an, depth - 1)
    return None


#: ops seen through when looking where a float value becomes an integer (rounding, clamping, movement)
_TO_INTEGER = _MOVES | {"Floor", "Ceil", "Round", "Clip"}
_WIDE_INTS = (6, 7)  #: ONNX element types INT32, INT64


def _wide_integer_sink(v: Value, depth: int = 4) -> Node | None:
    """A Cast turning ``v`` (through rounding, clamping or data movement)
    into int32/int64, or ``None``."""
    for u in v.consumers():
        if u.domain not in ("", "ai.onnx"):
            continue
        if u.op_type == "Cast" and int(u.attr("to", 0)) in _WIDE_INTS:
            return u
        if u.op_type in _TO_INTEGER and depth > 0 and u.outputs and u.inputs and u.inputs[0] is v:
            found = _wide_integer_sink(u.outputs[0], depth - 1)
            if found is not None:
                return found
    return None


def _check_wide_integer_inputs(node: Node, an: Analysis, data_in: list[Value]) -> None:
    """On an fp16 chip, refuse a float input converted from a run-time int32
    or int64 value (the int32 accumulator of a MatMulInteger/ConvInteger,
    positions, lengths), and a float output that becomes one (a bias
    quantized at run time, ``Floor(b / scale)`` -> Cast int32): fp16 holds
    integers exactly only up to 2048 and saturates beyond 65504 (a
    dynamically quantized product is 1e5 before its scale)."""
    if an.fprec != "fp16" or id(node) in an.member:
        return
    for v in data_in:
        if an.is_const(v) or an.dtype(v).kind != "f":
            continue
        src = _wide_integer_source(v, an)
        if src is not None:
            made = f" of {src.producer.op_type} {src.producer.name!r}" if src.producer is not None else ""
            raise Unsupported(f"input {v.name!r} is the float of the {an.dtype(src)} value {src.name!r}{made}, "
                              "which fp16 may not hold (exact only up to 2048, saturated beyond 65504); kept for "
                              "an fp32 backend")
    for v in node.outputs:
        if an.live(v) and an.dtype(v).kind == "f":
            cast = _wide_integer_sink(v)
            if cast is not None:
                raise Unsupported(f"its output {v.name!r} becomes an integer (Cast {cast.name!r} to "
                                  f"{'int32' if int(cast.attr('to', 0)) == 6 else 'int64'}, e.g. a quantized bias), "
                                  "which fp16 holds exactly only up to 2048; kept for an fp32 backend")


def _check_fp16_constants(node: Node, an: Analysis) -> None:
    """On an fp16 chip, refuse a node with a constant input whose values do
    not fit fp16: the chip stores weights in fp16, and a clamped weight is a
    silently different model (int8 groups keep their float parameters in fp32)."""
    if an.fprec != "fp16" or id(node) in an.member:
        return
    for v in node.inputs:
        if v is None or not an.is_const(v):
            continue
        bad = fp16_unsafe_value(np.asarray(an.const(v)))
        if bad is not None:
            raise Unsupported(f"constant {v.name!r} holds {bad:.4g}, beyond fp16 (+-{FP16_MAX:g}); the chip stores "
                              "weights in fp16 and would saturate it")
