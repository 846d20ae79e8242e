"""Shared helpers of the quantization kernels: quantized type ranges,
scale / zero-point broadcasting (per-tensor, per-axis, blocked) and
saturating casts to integer and small-float types."""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnrt_core.ir.dtypes import DataType

try:
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover
    _mld = None

__all__ = [
    "int_range",
    "is_int_type",
    "is_float_type",
    "dtype_from_attr",
    "expand_param",
    "saturate_cast",
    "rne",
    "arith_float",
    "normalize_axis",
]

_NATIVE_INTS = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)}
_SMALL_INTS: set[np.dtype] = set()
_FNUZ: set[np.dtype] = set()
if _mld is not None:
    _SMALL_INTS = {np.dtype(getattr(_mld, n)) for n in ("int4", "uint4", "int2", "uint2") if hasattr(_mld, n)}
    _FNUZ = {np.dtype(getattr(_mld, n)) for n in ("float8_e4m3fnuz", "float8_e5m2fnuz") if hasattr(_mld, n)}


def is_int_type(dt: np.dtype) -> bool:
    dt = np.dtype(dt)
    return dt in _NATIVE_INTS or dt in _SMALL_INTS


def is_float_type(dt: np.dtype) -> bool:
    """True for every floating type, native or ``ml_dtypes``."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return True
    if _mld is None or dt.kind != "V":
        return False
    try:
        _mld.finfo(dt)
        return True
    except (ValueError, TypeError):
        return False


def int_range(dt: np.dtype) -> tuple[int, int]:
    """(min, max) of an integer type, including int4/uint4/int2/uint2."""
    dt = np.dtype(dt)
    if dt in _NATIVE_INTS:
        info = np.iinfo(dt)
    else:
        info = _mld.iinfo(dt)
    return int(info.min), int(info.max)


def dtype_from_attr(code: int) -> np.dtype:
    """numpy dtype of an ONNX ``TensorProto.DataType`` code (``output_dtype`` attributes)."""
    return DataType(int(code)).numpy


_ARITH = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)}
if _mld is not None:
    _ARITH.add(np.dtype(_mld.bfloat16))


def arith_float(dt: np.dtype) -> np.dtype:
    """The type to compute in for a scale of type ``dt``: the type itself for
    float16/bfloat16/float32/float64, float32 for anything else (float8 scales)."""
    dt = np.dtype(dt)
    return dt if dt in _ARITH else np.dtype(np.float32)


def rne(x: np.ndarray) -> np.ndarray:
    """Round half to even (numpy's ``rint``)."""
    return np.rint(x)


def saturate_cast(y: np.ndarray, dt: np.dtype, saturate: bool = True) -> np.ndarray:
    """Cast real values ``y`` to a quantized type.

    Integer types: round half to even, clip to the type range.  Small float
    types (float8/float6/float4): round to nearest even through ``ml_dtypes``;
    with ``saturate`` finite overflow and +-inf clamp to +-max (fnuz types map
    inf to NaN, as the ONNX saturation table says)."""
    dt = np.dtype(dt)
    if is_int_type(dt):
        lo, hi = int_range(dt)
        return np.clip(np.rint(y), lo, hi).astype(dt)
    if saturate and dt.kind == "V":
        fmax = float(_mld.finfo(dt).max)
        y = np.asarray(y, dtype=np.float32)
        clipped = np.clip(y, -fmax, fmax)
        if dt in _FNUZ:
            clipped = np.where(np.isinf(y), np.float32(np.nan), clipped)
        return clipped.astype(dt)
    return np.asarray(y).astype(dt)


def expand_param(
    p: np.ndarray,
    x_shape: tuple[int, ...],
    axis: int,
    block_size: int,
    fail: Callable[[str], Exception],
    name: str = "scale",
) -> np.ndarray:
    """Reshape a scale or zero point so that it broadcasts against ``x``.

    A scalar (or one-element 1-D tensor when ``block_size`` is 0) is
    per-tensor; a 1-D tensor of length ``x.shape[axis]`` is per-axis; a tensor
    of the rank of ``x`` with ``ceil(D/block_size)`` entries along ``axis``
    is blocked and is repeated ``block_size`` times along that axis."""
    p = np.asarray(p)
    rank = len(x_shape)
    if p.size == 1 and p.ndim <= 1 and not block_size:
        return p.reshape(())
    axis = normalize_axis(axis, rank, fail)
    if block_size and block_size > 0:
        if p.ndim != rank:
            raise fail(f"blocked quantization needs {name} of rank {rank}, got shape {p.shape}")
        d = x_shape[axis]
        nblocks = -(-d // block_size)
        for i, (ps, xs) in enumerate(zip(p.shape, x_shape)):
            want = nblocks if i == axis else xs
            if ps != want:
                raise fail(
                    f"blocked {name} shape {p.shape} does not match input shape {tuple(x_shape)} "
                    f"with axis={axis}, block_size={block_size}"
                )
        return np.repeat(p, block_size, axis=axis)[(slice(None),) * axis + (slice(0, d),)]
    if p.ndim == 1:
        if rank == 0 or p.shape[0] != x_shape[axis]:
            raise fail(
                f"per-axis {name} of length {p.shape[0]} does not match input dimension "
                f"{x_shape[axis] if rank else '()'} on axis {axis}"
            )
        shape = [1] * rank
        shape[axis] = p.shape[0]
        return p.reshape(shape)
    raise fail(f"{name} must be a scalar or a 1-D tensor (got shape {p.shape}) unless block_size is set")


def normalize_axis(axis: int, rank: int, fail: Callable[[str], Exception]) -> int:
    if not -rank <= axis < max(rank, 1):
        raise fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0
