"""Number formats of the chip: fp16 storage with fp32 accumulation, int8
storage with int32 accumulation and requantization."""
from __future__ import annotations

import numpy as np

__all__ = [
    "STORAGE", "FP16_MAX", "storage_dtype", "f32", "erf", "quantize", "dequantize", "requantize",
    "qparams_shape", "tolerance", "round_fp16", "is_fp16_value",
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


_EXP_BITS = np.uint32(0x7F800000)
_SIGN_BIT = np.uint32(0x80000000)
#: bits of 2**-14, the smallest normal fp16 exponent (the step of fp16 subnormals is 2**-24)
_MIN_NORMAL_BITS = np.uint32(0x38800000)
#: added to an exponent field: 2**(e + 13) * 1.5, whose fp32 ulp is the fp16 step 2**(e - 10)
_MAGIC_BITS = np.uint32((13 << 23) | 0x400000)


def round_fp16(x: np.ndarray, scratch: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Round the fp32 array ``x`` in place to fp16 values (returns ``x``): the
    chip's store, bit for bit ``clip(x, +-FP16_MAX).astype(float16)``
    widened back (round half to even, subnormals, NaN stays NaN, the sign of
    zero kept) in a few vectorised passes instead of numpy's scalar casts.

    Adding ``c = 1.5 * 2**(e + 13)`` (``e``: the exponent of ``x``, at least
    -14) makes the fp32 sum's ulp the fp16 step at ``x``, so the fp32 add
    rounds half to even onto the fp16 grid and subtracting ``c`` is exact.
    ``scratch``: two flat arrays (uint32, float32) of at least ``x.size``."""
    if x.dtype != np.float32 or not x.flags.c_contiguous:
        raise ValueError("round_fp16 needs a contiguous float32 array")
    n = x.size
    if scratch is None or scratch[0].size < n:
        scratch = (np.empty(n, np.uint32), np.empty(n, np.float32))
    np.clip(x, -FP16_MAX, FP16_MAX, out=x)  # the chip's stores saturate
    bits = x.reshape(-1).view(np.uint32)
    step = np.bitwise_and(bits, _EXP_BITS, out=scratch[0][:n])
    np.clip(step, _MIN_NORMAL_BITS, _EXP_BITS, out=step)  # (clip is faster than maximum)
    step += _MAGIC_BITS  # NaN's exponent wraps: NaN + anything stays NaN
    magic = step.view(np.float32)
    with np.errstate(invalid="ignore"):
        y = np.add(x.reshape(-1), magic, out=scratch[1][:n])
        y -= magic
    sign = np.bitwise_and(bits, _SIGN_BIT, out=step)  # (x + c) - c is +0 for a negative x rounding to zero
    np.bitwise_or(y.view(np.uint32), sign, out=bits)
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
