"""Python values as the builder's element types, shapes and constant arrays."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_core.builder.schema import BuilderError
from nnrt_core.builder.var import Var
from nnrt_core.ir import DataType, Dim, Value

__all__ = ["DTYPE_ALIASES", "as_array", "as_dtype", "as_shape"]

DTYPE_ALIASES = {"float": DataType.FLOAT, "double": DataType.DOUBLE, "half": DataType.FLOAT16,
                  "bfloat16": DataType.BFLOAT16, "bool": DataType.BOOL, "string": DataType.STRING}


def as_dtype(dtype: Any, where: str) -> DataType:
    """``dtype`` (numpy dtype, name such as ``"float32"``/``"half"``, or
    :class:`DataType`) as an element type; :class:`BuilderError` naming ``where`` otherwise."""
    if isinstance(dtype, DataType):
        if dtype == DataType.UNDEFINED:
            raise BuilderError(f"{where}: element type UNDEFINED is not a tensor type")
        return dtype
    if isinstance(dtype, str):
        key = dtype.strip()
        if key.lower() in DTYPE_ALIASES:
            return DTYPE_ALIASES[key.lower()]
        if key.upper() in DataType.__members__ and key.upper() != "UNDEFINED":
            return DataType[key.upper()]
    try:
        return DataType.from_numpy(dtype)
    except TypeError:
        pass
    names = "float32, float16, int64, int32, int8, uint8, bool, ..."
    raise BuilderError(f"{where}: unknown element type {dtype!r}; use a numpy dtype ({names}) or a DataType")


def as_shape(shape: Sequence[Dim] | None, where: str) -> tuple[Dim, ...] | None:
    """``shape`` (ints >= 0, symbolic names, ``None`` dims; ``None`` = unknown rank) checked as a tuple."""
    if shape is None:
        return None
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)):
        raise BuilderError(f"{where}: shape must be a list of dims (int, symbolic name or None), got {shape!r}")
    dims: list[Dim] = []
    for i, d in enumerate(shape):
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
            dims.append(int(d))
        elif (isinstance(d, str) and d) or d is None:
            dims.append(d)
        else:
            raise BuilderError(f"{where}: dimension {i} must be an int >= 0, a symbolic name or None, got {d!r}")
    return tuple(dims)


def as_array(value: Any, dtype: DataType | None, where: str) -> np.ndarray:
    """Constant data as a contiguous array of ``dtype`` (default: the data's
    own type, Python floats as float32); :class:`BuilderError` when it cannot be one."""
    if isinstance(value, (Var, Value)):
        raise BuilderError(f"{where}: expects data (an array or numbers), got the graph value {value.name!r}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise BuilderError(f"{where}: cannot turn {type(value).__name__} into an array: {e}") from None
    if dtype is not None:
        try:
            target = dtype.numpy
        except TypeError:
            raise BuilderError(f"{where}: element type {dtype.name} has no numpy type to hold constants") from None
        if arr.dtype.kind in "OUS" and target != np.dtype(object):
            raise BuilderError(f"{where}: cannot store {arr.dtype} data as {dtype.name}")
        return np.ascontiguousarray(arr.astype(target, copy=False))
    if arr.dtype == object:
        if not all(isinstance(x, str) for x in arr.flat):
            raise BuilderError(f"{where}: cannot turn {type(value).__name__} into a numeric or string array")
    elif arr.dtype.kind in "US":
        arr = arr.astype(object)
    elif not isinstance(value, (np.ndarray, np.generic)):
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
    try:
        DataType.from_numpy(arr.dtype)
    except TypeError:
        raise BuilderError(f"{where}: numpy dtype {arr.dtype} has no ONNX element type") from None
    return np.ascontiguousarray(arr) if arr.dtype != object else arr
