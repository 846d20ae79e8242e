"""Element types of tensors.

The numbering follows the ONNX ``TensorProto.DataType`` enum so that converting
to and from ONNX is a plain integer copy, but nothing here imports protobuf.
Exotic types (bfloat16, float8, int4...) map to ``ml_dtypes`` numpy types when
that package is installed (it ships with ``onnx``); it is imported the first
time one of them is asked for (~10 ms that models of native types never pay).
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np

__all__ = ["DataType"]


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
        dt = _TO_NUMPY.get(self)
        if dt is None and self.name in _EXOTIC and _load_exotic():
            dt = _TO_NUMPY.get(self)
        if dt is None:
            raise TypeError(f"element type {self.name} has no numpy equivalent here")
        return dt

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
        t = _FROM_NUMPY.get(dt)
        if t is None and dt.isbuiltin == 2 and _load_exotic():  # a user-defined numpy type: ml_dtypes?
            t = _FROM_NUMPY.get(dt)
        if t is None:
            raise TypeError(f"numpy dtype {dt} has no nnrt element type")
        return t


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
#: exotic element type -> its ``ml_dtypes`` name
_EXOTIC = {"BFLOAT16": "bfloat16", "FLOAT8E4M3FN": "float8_e4m3fn", "FLOAT8E4M3FNUZ": "float8_e4m3fnuz",
           "FLOAT8E5M2": "float8_e5m2", "FLOAT8E5M2FNUZ": "float8_e5m2fnuz", "UINT4": "uint4", "INT4": "int4",
           "FLOAT4E2M1": "float4_e2m1fn", "FLOAT8E8M0": "float8_e8m0fnu", "UINT2": "uint2", "INT2": "int2",
           "FLOAT6E2M3": "float6_e2m3fn", "FLOAT6E3M2": "float6_e3m2fn"}
_exotic_state: list[bool] = []  # [True] once ml_dtypes was imported, [False] when it is missing


def _load_exotic() -> bool:
    """Add the ``ml_dtypes`` types to the tables (once); False without ml_dtypes."""
    if not _exotic_state:
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover
            _exotic_state.append(False)
            return False
        for name, attr in _EXOTIC.items():
            if hasattr(ml_dtypes, attr):
                dt = np.dtype(getattr(ml_dtypes, attr))
                _TO_NUMPY[DataType[name]] = dt
                _FROM_NUMPY[dt] = DataType[name]
        _exotic_state.append(True)
    return _exotic_state[0]


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
