"""Cast and CastLike, every dtype pair.

* float -> 8-bit float types saturate to the largest finite value when
  ``saturate=1`` (the default, opset 19+); otherwise they convert the
  ml_dtypes way (overflow becomes inf or NaN),
* float -> FLOAT8E8M0 honours ``round_mode`` ("up" default, "down", "nearest"),
* float -> the 2- and 4-bit integer types truncates toward zero and keeps the
  low bits (two's complement), as a fixed-point -> fixed-point cast does: the
  spec leaves out-of-range values undefined and ml_dtypes changed its answer
  between releases (0.6 wraps, 0.7 gives 0), so nnrt does not follow it there;
  NaN and infinities give 0,
* strings parse as numbers ("NaN", "INF", "-inf" included); numbers format as
  their shortest round-trip repr ("NaN", "INF", "-INF" for the special values,
  bools as "0"/"1").
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from nnrt_core.ir.dtypes import DataType

from ...kernel import Kernel, NodeInfo, register


@functools.cache
def _exotic() -> tuple[tuple[np.dtype, ...], np.dtype | None, Any]:
    """(the 8-, 6- and 4-bit float types, float8e8m0, the ml_dtypes module):
    imported on the first cast to such a type (~5 ms most models never pay)."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover
        return (), None, None
    float8 = tuple(np.dtype(getattr(ml_dtypes, n))
                   for n in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                             "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn") if hasattr(ml_dtypes, n))
    e8m0 = np.dtype(ml_dtypes.float8_e8m0fnu) if hasattr(ml_dtypes, "float8_e8m0fnu") else None
    return float8, e8m0, ml_dtypes


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """Power-of-two exponent encoding: keep the float32 exponent, rounded per mode."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exp == 0xFF
    if round_mode == "up":
        up = (bits & 0x7FFFFF) > 0
    elif round_mode == "nearest":
        g = (bits & 0x400000) > 0
        rest = (bits & 0x3FFFFF) > 0
        up = g & (rest | (exp > 0))
    else:
        up = np.zeros(bits.shape, dtype=bool)
    up &= ~special
    if saturate:
        up &= exp != 0xFE
    exp = exp + up.astype(np.uint16)
    exp[special] = 0xFF
    return np.minimum(exp, 0xFF).astype(np.uint8).view(_exotic()[1])


def cast(x: np.ndarray, to: np.dtype, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """Convert ``x`` to ``to`` following ONNX Cast rules."""
    src = x.dtype
    if src == to:
        return x
    if to.kind == "O" or to.kind in "US":
        if src.kind in "OUS":
            return x.astype(object)
        if src.kind in "iub":
            return x.astype(np.int64 if src.kind == "b" else src).astype(str).astype(object)
        xs = x if src.kind == "f" else x.astype(np.float32)
        strs = xs.astype(str)  # shortest round-trip repr of each value in its own precision
        return np.vectorize(_SPECIAL.get, otypes=[object])(strs, strs) if strs.size else strs.astype(object)
    if src.kind in "OUS":
        strs = np.char.strip(x.astype(str))
        if to.kind == "b":
            return np.char.lower(strs) == "true" if strs.size else np.zeros(x.shape, dtype=bool)
        if to.kind in "iu":
            return strs.astype(np.float64).astype(to) if strs.size else np.zeros(x.shape, dtype=to)
        return cast(strs.astype(np.float64) if strs.size else np.zeros(x.shape), to, saturate, round_mode)
    float8, e8m0, mld = _exotic() if to.isbuiltin == 2 else ((), None, None)  # 2: a user type (ml_dtypes)
    if e8m0 is not None and to == e8m0:
        return _to_e8m0(x, saturate, round_mode)
    if mld is not None and to.name in _NARROW_INTS and (src.kind == "f" or src in float8):
        return _to_narrow_int(x, to, mld)
    if saturate and to in float8 and (src.kind == "f" or src in float8):
        hi = float(mld.finfo(to).max)
        x32 = x.astype(np.float32)
        return np.clip(x32, -hi, hi).astype(to)
    with np.errstate(all="ignore"):
        return x.astype(to)


_SPECIAL = {"nan": "NaN", "inf": "INF", "-inf": "-INF"}
_NARROW_INTS = frozenset({"int4", "uint4", "int2", "uint2"})


def _to_narrow_int(x: np.ndarray, to: np.dtype, mld: Any) -> np.ndarray:
    """float -> int4/uint4/int2/uint2: truncate, then keep the low bits."""
    info = mld.iinfo(to)
    bits = int(info.bits)
    with np.errstate(all="ignore"):
        wide = np.trunc(x.astype(np.float64))
        wide = np.where(np.isfinite(wide), np.clip(wide, -2.0**62, 2.0**62), 0.0).astype(np.int64)
    low = wide & ((1 << bits) - 1)
    if int(info.min) < 0:
        low = np.where(low >= 1 << (bits - 1), low - (1 << bits), low)
    return low.astype(to)


class _CastBase(Kernel):
    def _parse(self, node: NodeInfo) -> None:
        self.saturate = bool(node.attr("saturate", 1))
        self.round_mode = node.attr("round_mode", "up")
        if self.round_mode not in ("up", "down", "nearest"):
            raise self.fail(f"unknown round_mode {self.round_mode!r}")


@register
class Cast(_CastBase):
    op_type = "Cast"
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self._parse(node)
        to = node.attr("to")
        if to is None:
            raise self.fail("attribute to is required")
        if isinstance(to, str):  # opset 1 spelled the type as a string
            to = DataType[to.upper()]
        try:
            self.to = DataType(int(to)).numpy
        except (ValueError, TypeError) as e:
            raise self.fail(f"unsupported target type {to}: {e}") from None

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (cast(x, self.to, self.saturate, self.round_mode),)


@register
class CastLike(_CastBase):
    op_type = "CastLike"
    since_version = 15

    def _setup(self, node: NodeInfo) -> None:
        self._parse(node)

    def __call__(self, x: np.ndarray, like: np.ndarray) -> tuple[np.ndarray]:
        return (cast(x, like.dtype, self.saturate, self.round_mode),)
