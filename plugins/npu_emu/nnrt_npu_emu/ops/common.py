"""Shared building blocks of the op set: op/kernel registries, :class:`Step`,
:class:`Unsupported` and the saturating :func:`store`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from nnrt_core.ir import Node, Value
from nnrt_npu_emu.numerics import FP16_MAX

__all__ = ["OpDef", "Step", "LowerContext", "OPS", "KERNELS", "EXACT", "STORE_KERNELS", "op", "kernel",
           "store_kernel", "Unsupported", "attr_ints", "store"]


class Unsupported(Exception):
    """Raised by a check or lowering: the node cannot run on the chip (the reason)."""


class LowerContext(Protocol):
    """What op definitions may ask about the graph being lowered."""

    precision: str  #: compute precision of float ops: fp32 | fp16

    def const(self, v: Value | None) -> np.ndarray | None: ...
    def is_const(self, v: Value | None) -> bool: ...
    def shape(self, v: Value) -> tuple[int, ...]: ...


@dataclass
class Step:
    """One device instruction before memory planning.  ``ins`` entries are
    graph values, new constant arrays (transformed weights) or None."""

    kernel: str
    ins: list[Value | np.ndarray | None]
    outs: list[Value]
    attrs: dict[str, Any] = field(default_factory=dict)
    macs: int = 0


@dataclass(frozen=True)
class OpDef:
    name: str
    lower: Callable[[Node, LowerContext], list[Step]]
    check: Callable[[Node, LowerContext], str | None] | None = None
    #: inputs that must be compile-time constants (parameters, not weights)
    const_inputs: tuple[int, ...] = ()
    #: int8 strategy inside a DQ->op->Q group: "int" exact integer, "generic"
    #: dequantize->fp32->requantize (LUT / internal high precision), "none"
    int8: str = "generic"
    #: ops that may have non-float tensors (shape math) only when folded
    fold_only: bool = False
    #: data movement over contiguous memory: the rank of the device instruction
    #: the node lowers to after folding its axes (0: no instruction, a
    #: re-labelled buffer), checked against the chip's ``max_rank`` instead of
    #: its tensors' own ranks; None: every tensor's rank is checked
    device_rank: Callable[[Node, LowerContext], int] | None = None
    #: non-float operands an exact op allows besides floats: "bool" (data
    #: movement of masks), "any" (comparisons, boolean logic, selection:
    #: booleans and integers); nothing such an op writes is rounded
    exact_dtypes: str = ""


OPS: dict[str, OpDef] = {}
KERNELS: dict[str, Callable[[Sequence[np.ndarray], Sequence[np.ndarray], dict], None]] = {}
#: kernel -> predicate on its attributes: every float output element is one of
#: its input elements or zero, so results need no rounding to the storage type
EXACT: dict[str, Callable[[dict], bool]] = {}
#: kernel -> its variant ``fn(ins, outs, attrs, store)`` for one fp32 output
#: that is an fp16 store: it calls ``store(sel)`` on each finished piece of
#: the output (rounding while the piece is in cache; see
#: :class:`nnrt_npu_emu.binding.Store`), the same bits as the kernel + a store
STORE_KERNELS: dict[str, Callable[[Sequence[np.ndarray], Sequence[np.ndarray], dict, Callable], None]] = {}


def op(name: str, *, check=None, const_inputs: tuple[int, ...] = (), int8: str = "generic",
       fold_only: bool = False, device_rank=None, exact_dtypes: str = ""):
    def deco(fn):
        OPS[name] = OpDef(name, fn, check, const_inputs, int8, fold_only, device_rank, exact_dtypes)
        return fn
    return deco


def kernel(name: str, exact: bool | Callable[[dict], bool] = False):
    """Register ``fn(ins, outs, attrs)`` as device kernel ``name``.  ``exact``
    (or a predicate on the attributes): it only moves or selects values
    (see :data:`EXACT`)."""
    def deco(fn):
        KERNELS[name] = fn
        if exact:
            EXACT[name] = exact if callable(exact) else (lambda attrs: True)
        return fn
    return deco


def store_kernel(name: str):
    """Register ``fn(ins, outs, attrs, store)`` as the store-epilogue variant of kernel ``name``."""
    def deco(fn):
        STORE_KERNELS[name] = fn
        return fn
    return deco


def attr_ints(node: Node, name: str, default: Sequence[int] | None = None) -> list[int] | None:
    v = node.attr(name, None)
    if v is None:
        return None if default is None else list(default)
    return [int(x) for x in v]


def store(out: np.ndarray, value: Any, owned: bool = False) -> None:
    """Write a result into an output view (rounding to its storage type).

    ``owned``: ``value`` is a temporary of the caller's, which the rounding
    may overwrite instead of allocating another."""
    value = np.asarray(value)
    if value is out:
        return
    if value.shape != out.shape:
        value = value.reshape(out.shape)
    if out.dtype.kind in "iu" and value.dtype.kind == "f":
        value = np.rint(value, out=value) if owned else np.rint(value)
    elif out.dtype == np.float16 and value.dtype != np.float16:
        # the chip's stores saturate (NaN stays NaN)
        value = np.clip(value, -FP16_MAX, FP16_MAX, out=value if owned and value.dtype.kind == "f" else None)
    np.copyto(out, value, casting="unsafe")

