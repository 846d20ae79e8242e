"""Element types of tensors.

The numbering follows the ONNX ``TensorProto.DataType`` enum so that converting
to and from ONNX is a plain integer copy, but nothing here imports protobuf.
Exotic types (bfloat16, float8, int4...) map to ``ml_dtypes`` numpy types when
that package is installed (it ships with ``onnx``).
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np

__all__ = ["DataType"]

try:  # pragma: no cover - exercised implicitly through onnx's dependency
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover
    _mld = None


class DataType(enum.IntEnum):
    """Tensor element type, numbered like ONNX's ``TensorProto.DataType``."""

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26
    FLOAT6E2M3 = 27
    FLOAT6E3M2 = 28

    # ------------------------------------------------------------------ numpy
    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that stores this element type."""
        try:
            return _TO_NUMPY[self]
        except KeyError:
            raise TypeError(f"element type {self.name} has no numpy equivalent here") from None

    @property
    def itemsize(self) -> int:
        """Bytes per element in host memory (strings count as object pointers)."""
        return self.numpy.itemsize

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_integer(self) -> bool:
        return self in _INTEGERS

    @classmethod
    def from_numpy(cls, dtype: Any) -> "DataType":
        """The element type for a numpy dtype (or anything ``np.dtype`` accepts)."""
        dt = np.dtype(dtype)
        if dt.kind in ("U", "S", "O"):
            return cls.STRING
        try:
            return _FROM_NUMPY[dt]
        except KeyError:
            raise TypeError(f"numpy dtype {dt} has no nnrt element type") from None


_TO_NUMPY: dict[DataType, np.dtype] = {
    DataType.FLOAT: np.dtype(np.float32),
    DataType.UINT8: np.dtype(np.uint8),
    DataType.INT8: np.dtype(np.int8),
    DataType.UINT16: np.dtype(np.uint16),
    DataType.INT16: np.dtype(np.int16),
    DataType.INT32: np.dtype(np.int32),
    DataType.INT64: np.dtype(np.int64),
    DataType.STRING: np.dtype(object),
    DataType.BOOL: np.dtype(np.bool_),
    DataType.FLOAT16: np.dtype(np.float16),
    DataType.DOUBLE: np.dtype(np.float64),
    DataType.UINT32: np.dtype(np.uint32),
    DataType.UINT64: np.dtype(np.uint64),
    DataType.COMPLEX64: np.dtype(np.complex64),
    DataType.COMPLEX128: np.dtype(np.complex128),
}
if _mld is not None:
    for _name, _attr in [
        ("BFLOAT16", "bfloat16"),
        ("FLOAT8E4M3FN", "float8_e4m3fn"),
        ("FLOAT8E4M3FNUZ", "float8_e4m3fnuz"),
        ("FLOAT8E5M2", "float8_e5m2"),
        ("FLOAT8E5M2FNUZ", "float8_e5m2fnuz"),
        ("UINT4", "uint4"),
        ("INT4", "int4"),
        ("FLOAT4E2M1", "float4_e2m1fn"),
        ("FLOAT8E8M0", "float8_e8m0fnu"),
        ("UINT2", "uint2"),
        ("INT2", "int2"),
        ("FLOAT6E2M3", "float6_e2m3fn"),
        ("FLOAT6E3M2", "float6_e3m2fn"),
    ]:
        if hasattr(_mld, _attr):
            _TO_NUMPY[DataType[_name]] = np.dtype(getattr(_mld, _attr))

_FROM_NUMPY: dict[np.dtype, DataType] = {
    v: k for k, v in _TO_NUMPY.items() if k is not DataType.STRING
}
_FLOATS = frozenset(
    {DataType.FLOAT, DataType.FLOAT16, DataType.DOUBLE, DataType.BFLOAT16}
    | {t for t in DataType if t.name.startswith(("FLOAT8", "FLOAT4", "FLOAT6"))}
)
_INTEGERS = frozenset(
    {
        DataType.UINT8, DataType.INT8, DataType.UINT16, DataType.INT16, DataType.INT32,
        DataType.INT64, DataType.UINT32, DataType.UINT64, DataType.UINT4, DataType.INT4,
        DataType.UINT2, DataType.INT2,
    }
)
