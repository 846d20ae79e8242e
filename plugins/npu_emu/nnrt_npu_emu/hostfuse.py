"""Host-side fusion of a device program's fp16 stores with the activation
that follows them (how the bound program saves passes, not a change of the
program: the instructions, their cost and the device memory stay).

On the chip an instruction storing fp16 rounds (and saturates) its result;
an exact activation reading that store (``unary`` Relu, or Clip with bounds
that are nonzero fp16 values) then stores ``act(round(y))``.  Rounding is
monotone and keeps fp16 values, so ``act(round(y)) == round(clamp(y))``
with the activation's clamp merged into the saturation clamp: one clip pass
instead of a clip and an activation pass, bit for bit (a Relu clamps at the
smallest float32 above zero, which rounds to +0.0 like ``max(-0.0, 0.0)``;
zero bounds would change the sign of a rounded zero, so they do not fuse).

Fusion needs that no other instruction reads the producer's buffer before
it is overwritten.  The producer then writes the activation's buffer
directly, or, when that buffer overlaps the producer's inputs (the lifetime
planner may give it an input's bytes), its own buffer, which the store's
clamp pass reads (``PlannedStep.via``).  A producer that is one ufunc writes
the activation's buffer in any case (numpy makes it overlap-safe:
:data:`INPLACE_SAFE`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnrt_npu_emu.numerics import FP16_MAX, is_fp16_value
from nnrt_npu_emu.ops import EXACT
from nnrt_npu_emu.program import Instr, Operand, Program

__all__ = ["PlannedStep", "plan_steps", "STORE_BOUNDS", "RELU_LO", "INPLACE_SAFE"]

#: the saturation bounds of an fp16 store without activation
STORE_BOUNDS = (np.float32(-FP16_MAX), np.float32(FP16_MAX))
#: a fused Relu's lower bound: the smallest float32 above zero (rounds to +0.0)
RELU_LO = np.float32(np.finfo(np.float32).smallest_subnormal)
#: kernels that may write over their inputs: one numpy ufunc over two operands
#: (numpy copies an operand that overlaps the output when that would matter)
INPLACE_SAFE = {"nary": lambda ins: len(ins) == 2}


@dataclass
class PlannedStep:
    """One host step: instruction ``index`` (and ``count - 1`` fused
    activations after it), writing ``outs``; ``rounded[i]``: output ``i`` is
    an fp16 store (rounded, clamped to ``bounds``); ``via``: the buffer the
    kernel writes output 0 to, which its store reads (None: ``outs[0]``)."""

    index: int
    count: int
    kernel: str
    ins: list[Operand | None]
    outs: list[Operand]
    attrs: dict[str, Any]
    rounded: list[bool]
    bounds: tuple[np.float32, np.float32] = STORE_BOUNDS
    via: Operand | None = None


def _rounded(ins: Instr) -> list[bool]:
    exact = EXACT.get(ins.kernel)
    if exact is not None and exact(ins.attrs):
        return [False] * len(ins.outs)
    return [o.space == "ws" and o.dtype == "float16" for o in ins.outs]


def _span(o: Operand) -> tuple[int, int]:
    return o.offset, o.offset + o.nbytes


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def activation_bounds(ins: Instr) -> tuple[np.float32, np.float32] | None:
    """The clamp an exact activation instruction applies, or None when it cannot fuse."""
    if ins.kernel != "unary":
        return None
    fn = ins.attrs.get("fn")
    if fn == "relu":
        return RELU_LO, STORE_BOUNDS[1]
    if fn != "clip":
        return None
    lo, hi = ins.attrs.get("min"), ins.attrs.get("max")
    if not (is_fp16_value(lo) and is_fp16_value(hi)) or lo == 0 or hi == 0 or \
            lo is not None and hi is not None and not lo < hi:
        return None
    return (STORE_BOUNDS[0] if lo is None else np.float32(lo)), (STORE_BOUNDS[1] if hi is None else np.float32(hi))


def read_later(instrs: list[Instr], start: int, span: tuple[int, int]) -> bool:
    """Whether an instruction from ``start`` on reads workspace bytes of
    ``span`` before they are all overwritten."""
    live = [span]
    for ins in instrs[start:]:
        for o in ins.ins:
            if o is not None and o.space == "ws" and any(_overlaps(_span(o), s) for s in live):
                return True
        for o in ins.outs:
            if o.space != "ws":
                continue
            w0, w1 = _span(o)
            live = [p for s in live for p in ((s[0], min(s[1], w0)), (max(s[0], w1), s[1])) if p[0] < p[1]]
        if not live:
            return False
    return False


def _fusable(instrs: list[Instr], k: int, rounded: list[bool]) -> tuple[tuple[np.float32, np.float32], bool] | None:
    """(the clamp of the activation after instruction ``k``, whether ``k``
    must write its own buffer) when the activation fuses into ``k``'s store."""
    if k + 1 >= len(instrs) or rounded != [True]:
        return None
    prod, act = instrs[k], instrs[k + 1]
    bounds = activation_bounds(act)
    if bounds is None:
        return None
    a, src, dst = prod.outs[0], act.ins[0], act.outs[0]
    if src is None or src.space != "ws" or _span(src) != _span(a) or dst.space != "ws" \
            or dst.dtype != "float16" or dst.nbytes != a.nbytes:
        return None
    if _overlaps(_span(dst), _span(a)) and _span(dst) != _span(a):
        return None
    inplace = INPLACE_SAFE.get(prod.kernel)
    via = not (inplace is not None and inplace(prod.ins)) and any(
        o is not None and o.space == "ws" and _overlaps(_span(o), _span(dst)) for o in prod.ins)
    if _span(dst) != _span(a) and read_later(instrs, k + 2, _span(a)):
        return None
    return bounds, via


def plan_steps(program: Program, fuse: bool = True) -> list[PlannedStep]:
    """The host steps of ``program``: one per instruction, an fp16 store and
    the exact activation reading it fused into one (``fuse``)."""
    instrs = program.instrs
    steps: list[PlannedStep] = []
    k = 0
    while k < len(instrs):
        ins = instrs[k]
        rounded = _rounded(ins)
        fused = _fusable(instrs, k, rounded) if fuse else None
        if fused is not None:
            steps.append(PlannedStep(k, 2, ins.kernel, list(ins.ins), [instrs[k + 1].outs[0]], ins.attrs, [True],
                                     fused[0], ins.outs[0] if fused[1] else None))
            k += 2
            continue
        steps.append(PlannedStep(k, 1, ins.kernel, list(ins.ins), list(ins.outs), ins.attrs, rounded))
        k += 1
    return steps
