"""Number formats of the chip: fp16 storage with fp32 accumulation, int8
storage with int32 accumulation and requantization."""
from __future__ import annotations

import numpy as np

from nnrt_numpy.host_kernels import clip as _clip  # the clip ufunc itself: np.clip's wrapper costs more than a small store

__all__ = [
    "STORAGE", "FP16_MAX", "storage_dtype", "f32", "erf", "quantize", "dequantize", "requantize",
    "qparams_shape", "tolerance", "round_fp16", "store_fp16", "out_of_range", "is_fp16_value", "fp16_unsafe_value",
]

#: compute precision -> storage dtype of float activations and weights
STORAGE = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "int8": np.dtype(np.int8)}
#: largest finite fp16 value: the chip's fp16 stores saturate to +-FP16_MAX
FP16_MAX = float(np.finfo(np.float16).max)


def storage_dtype(precision: str) -> np.dtype:
    return STORAGE[precision]


def f32(a: np.ndarray) -> np.ndarray:
    """The fp32 view of an operand (the chip's accumulator type)."""
    return a if a.dtype == np.float32 else a.astype(np.float32)


#: float32's extremes and the infinities: mask sentinels ("minus infinity" fills), which saturating at +-65504 keeps
_SENTINELS = (float(np.finfo(np.float32).min), float(np.finfo(np.float32).max), -np.inf, np.inf)


def fp16_unsafe_value(a: np.ndarray) -> float | None:
    """A finite value of the float constant ``a`` beyond fp16's +-65504 that
    is not a mask sentinel (float32's extremes or an infinity), or ``None``:
    storing such a constant in fp16 would saturate a real weight."""
    if a.dtype.kind != "f" or a.dtype == np.float16 or not a.size:
        return None
    lo, hi = float(np.min(a)), float(np.max(a))
    if -FP16_MAX <= lo and hi <= FP16_MAX:
        return None
    big = a[np.abs(a) > FP16_MAX]
    bad = big[~np.isin(big, _SENTINELS)]
    return float(bad.flat[0]) if bad.size else None


_F16_LO, _F16_HI = np.float32(-FP16_MAX), np.float32(FP16_MAX)
_EXP_BITS = np.uint32(0x7F800000)
#: bits of 2**-14, the smallest normal fp16 exponent (the step of fp16 subnormals is 2**-24)
_MIN_NORMAL_BITS = np.uint32(0x38800000)
#: minus the bits of 2**e (e >= -14, the exponent of x): the bits of 2**(10 - e), which scales the fp16 step at x to 1
_INV_STEP_BITS = np.uint32((127 + 10 + 127) << 23)
#: added to the (floored) exponent bits of x: the bits of 1.5 * 2**(e + 13), whose float32 step is x's fp16 step
_MAGIC_BITS = np.uint32((13 << 23) | 0x400000)
_ZERO = np.float32(0.0)
#: the bits of 2**15, fp16's largest exponent: a store whose values reach it is checked exactly
_BIG_BITS = np.uint32((127 + 15) << 23)
_max = np.maximum.reduce  # the ufunc's reduce: ndarray.max's Python wrapper costs a microsecond


def round_fp16(x: np.ndarray, scratch: np.ndarray | None = None, lo: np.float32 = _F16_LO,
               hi: np.float32 = _F16_HI, src: np.ndarray | None = None) -> np.ndarray:
    """Round the fp32 array ``x`` in place to fp16 values (returns ``x``): the
    chip's store, bit for bit ``clip(x, +-FP16_MAX).astype(float16)``
    widened back (round half to even, subnormals, NaN stays NaN, the sign of
    zero kept).  :func:`store_fp16` does the work and also says whether the
    store saturated; see it for the arguments."""
    store_fp16(x, scratch, lo, hi, src)
    return x


def store_fp16(x: np.ndarray, scratch: np.ndarray | None = None, lo: np.float32 = _F16_LO,
               hi: np.float32 = _F16_HI, src: np.ndarray | None = None) -> float | None:
    """:func:`round_fp16`'s store; returns ``None``, or the value that did
    not fit (a finite value beyond +-FP16_MAX that the clamp ``lo``/``hi``
    saturated, an infinity, or NaN: the chip's float-status overflow flag).

    Rounding: six vectorised passes after the clamp instead of numpy's
    scalar casts (five when ``lo`` is positive: :func:`_round_positive`).
    With ``e`` the exponent of ``x`` (at least -14, where fp16 subnormals
    start), ``x * 2**(10 - e)`` is exact and its integer grid is the fp16
    grid at ``x``: ``rint`` rounds it half to even (keeping the sign of a
    zero) and dividing by the same power of two scales back exactly.  The
    power of two comes from the exponent bits by one integer subtraction.
    The overflow check costs one reduction: the largest exponent of the
    unclamped values (their bits, which the rounding needs anyway, taken
    before the clamp and capped at fp16's largest exponent after it); only a
    store reaching 2**15 is looked at exactly (:func:`out_of_range`).

    ``x`` may be any float32 view (a piece of a larger output); ``scratch``: a
    uint32 array of ``x``'s shape, or a flat one of at least ``x.size``
    elements.  ``lo`` / ``hi`` (float32, fp16 values or the smallest float32
    above zero) replace the saturation bounds: a fused activation's clamp
    applied in the same pass (see :mod:`nnrt_npu_emu.hostfuse`).  ``src``: the
    values to round into ``x`` (same shape), instead of ``x``'s own."""
    if x.dtype != np.float32:
        raise ValueError("round_fp16 needs a float32 array")
    n = x.size
    if scratch is None or scratch.size < n:
        scratch = np.empty(n, np.uint32)
    if scratch.shape != x.shape:
        scratch = scratch.reshape(-1)[:n].reshape(x.shape)
    s = x if src is None else src
    if lo > _ZERO:  # a positive clamp (a fused Relu): no sign to keep, one pass fewer
        bad = out_of_range(s, lo, hi) if n and not _max(s, None) <= _F16_HI else None  # NaN: not <=
        _clip(s, lo, hi, out=x)
        _round_positive(x, scratch)
        return bad
    scale = np.bitwise_and(s.view(np.uint32), _EXP_BITS, out=scratch)  # 2**e of the unclamped values
    bad = out_of_range(s, lo, hi) if n and _max(scale, None) >= _BIG_BITS else None
    _clip(s, lo, hi, out=x)  # the chip's stores saturate
    if lo != _F16_LO or hi != _F16_HI:  # a narrower clamp: the exponents of the clamped values
        np.bitwise_and(x.view(np.uint32), _EXP_BITS, out=scale)
    _clip(scale, _MIN_NORMAL_BITS, _BIG_BITS, out=scale)  # (clip is faster than maximum); NaN: 2**15
    np.subtract(_INV_STEP_BITS, scale, out=scale)  # 2**(10 - e); NaN's gives a finite power: NaN stays NaN
    np.multiply(x, scale.view(np.float32), out=x)
    np.rint(x, out=x)
    np.divide(x, scale.view(np.float32), out=x)  # exact: a power of two (as fast as a product here)
    return bad


def out_of_range(a: np.ndarray, lo: np.float32 = _F16_LO, hi: np.float32 = _F16_HI) -> float | None:
    """The first kind of value in ``a`` (fp32, before the store's clamp
    ``lo``/``hi``) that an fp16 store cannot hold: NaN, or the largest
    magnitude beyond +-FP16_MAX on a side the clamp leaves at fp16's range
    (a fused Relu6 legitimately clamps 1e6 to 6); ``None`` when all fit."""
    if np.isnan(a).any():
        return float("nan")
    top, bottom = float(a.max()), float(a.min())
    if hi >= _F16_HI and top > FP16_MAX:
        return top
    if lo <= _F16_LO and bottom < -FP16_MAX:
        return bottom
    return None


def _round_positive(x: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """:func:`round_fp16`'s rounding of ``x`` clamped to positive values (or
    NaN): ``(x + c) - c`` with ``c = 1.5 * 2**(e + 13)`` (``e`` the exponent
    of x, at least -14).  ``x + c`` stays in c's binade, whose float32 step
    is x's fp16 step, so the float32 addition rounds x half to even on that
    grid (c is an even number of steps) and the subtraction is exact.  An
    exact zero comes out +0.0, which is why this needs ``x > 0``; NaN stays
    NaN (its c is finite)."""
    c = np.bitwise_and(x.view(np.uint32), _EXP_BITS, out=scratch)
    _clip(c, _MIN_NORMAL_BITS, _EXP_BITS, out=c)
    np.add(c, _MAGIC_BITS, out=c)
    np.add(x, c.view(np.float32), out=x)
    np.subtract(x, c.view(np.float32), out=x)
    return x


def is_fp16_value(v: float | None) -> bool:
    """Whether ``v`` (a constant of a kernel) is None or exactly an fp16 value."""
    if v is None:
        return True
    with np.errstate(over="ignore"):
        return bool(abs(v) <= FP16_MAX and float(np.float16(v)) == v)


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorized erf (Abramowitz-Stegun 7.1.26, |err| < 1.5e-7)."""
    x = np.asarray(x, dtype=np.float64)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return (s * y).astype(np.float32)


def qparams_shape(param: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """Per-tensor (scalar) or per-channel (1-D along ``axis``) params, broadcastable."""
    p = np.asarray(param)
    if p.ndim == 0 or p.size == 1 and rank == 0:
        return p.reshape(())
    shape = [1] * rank
    shape[axis % rank] = p.size
    return p.reshape(shape)


def quantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round-half-to-even affine quantization with saturation (ONNX QuantizeLinear)."""
    info = np.iinfo(dtype)
    q = np.rint(np.asarray(x, np.float32) / np.asarray(scale, np.float32)) + np.asarray(zero_point, np.int32)
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    return ((q.astype(np.int32) - np.asarray(zero_point, np.int32)).astype(np.float32)
            * np.asarray(scale, np.float32))


def requantize(acc: np.ndarray, multiplier: np.ndarray, zero_point: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """int32 accumulator -> int8/uint8 with a per-tensor/per-channel real
    multiplier, rounded half to even, saturated (the chip's output stage)."""
    info = np.iinfo(dtype)
    q = np.rint(acc.astype(np.float64) * multiplier) + np.asarray(zero_point, np.int64)
    return np.clip(q, info.min, info.max).astype(dtype)


def tolerance(precision: str) -> tuple[float, float]:
    """(rtol, atol relative to the output's magnitude) a result of the chip
    in ``precision`` is expected to meet against an fp32 reference."""
    return {"fp32": (1e-4, 1e-5), "fp16": (2e-2, 5e-3), "int8": (0.1, 0.05)}[precision]
