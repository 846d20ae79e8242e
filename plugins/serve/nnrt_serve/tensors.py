"""Tensors of the Open Inference Protocol: datatype strings, and decoding a
request tensor (JSON ``data``, Triton's binary extension, gRPC contents)
into a NumPy array with its size checked before anything is allocated."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from nnrt_serve.errors import BadRequest, PayloadTooLarge

__all__ = ["DATATYPES", "datatype_of", "dtype_of", "check_shape", "from_json_data", "from_raw", "to_json_data",
           "GRPC_CONTENTS"]

#: protocol datatype -> NumPy dtype (little-endian, as the binary extension sends them)
DATATYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"), "INT8": np.dtype("<i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"), "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
}
_BY_DTYPE = {dt.newbyteorder("="): name for name, dt in DATATYPES.items()}

#: gRPC ``InferTensorContents`` field of each datatype (FP16 travels only as raw bytes)
GRPC_CONTENTS = {"BOOL": "bool_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
                 "UINT32": "uint_contents", "UINT64": "uint64_contents", "INT8": "int_contents",
                 "INT16": "int_contents", "INT32": "int_contents", "INT64": "int64_contents",
                 "FP32": "fp32_contents", "FP64": "fp64_contents"}


def datatype_of(dtype: Any) -> str:
    """The protocol's name of a NumPy dtype (``BYTES`` for strings and objects)."""
    if dtype is None:
        return "BYTES"
    dt = np.dtype(dtype)
    return _BY_DTYPE.get(dt.newbyteorder("="), "BYTES")


def dtype_of(tensor: str, datatype: Any) -> np.dtype:
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        hint = "; BYTES (string) tensors are not supported" if datatype == "BYTES" else ""
        raise BadRequest(f"tensor {tensor!r}: unknown datatype {datatype!r}; expected one of "
                         f"{', '.join(DATATYPES)}{hint}")
    return DATATYPES[datatype]


def check_shape(tensor: str, shape: Any, itemsize: int, max_bytes: int) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, refused when malformed or when the tensor
    would hold more than ``max_bytes``."""
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise BadRequest(f"tensor {tensor!r}: shape must be a list of integers >= 0, got {shape!r}")
    nbytes = math.prod(shape) * itemsize
    if nbytes > max_bytes:
        raise PayloadTooLarge(f"tensor {tensor!r}: shape {list(shape)} is {nbytes} bytes, over the limit of "
                              f"{max_bytes} bytes (the model's memory budget)")
    return tuple(shape)


def from_raw(tensor: str, datatype: str, shape: Sequence[int], data: bytes | memoryview,
             max_bytes: int) -> np.ndarray:
    """A tensor sent as raw little-endian bytes (the binary extension, gRPC ``raw_input_contents``)."""
    dt = dtype_of(tensor, datatype)
    shape = check_shape(tensor, shape, dt.itemsize, max_bytes)
    expected = math.prod(shape) * dt.itemsize
    if len(data) != expected:
        raise BadRequest(f"tensor {tensor!r}: {len(data)} bytes of binary data, but datatype {datatype} with "
                         f"shape {list(shape)} needs {expected} bytes")
    arr = np.frombuffer(data, dtype=dt).reshape(shape)
    return arr.astype(dt.newbyteorder("="), copy=False)


def from_json_data(tensor: str, datatype: str, shape: Sequence[int], data: Any, max_bytes: int) -> np.ndarray:
    """A tensor sent as JSON ``data``: a flat (row-major) or nested list of numbers."""
    dt = dtype_of(tensor, datatype)
    shape = check_shape(tensor, shape, dt.itemsize, max_bytes)
    if data is None:
        raise BadRequest(f"tensor {tensor!r}: no 'data' and no 'binary_data_size' parameter")
    if not isinstance(data, list):
        data = [data]
    try:
        given = np.array(data)
        if dt.kind in "iub" and given.dtype.kind == "f" and not np.all(np.isfinite(given) & (given == np.round(given))):
            raise ValueError("fractional or non-finite numbers for an integer datatype")
        arr = given.astype(dt.newbyteorder("="), casting="unsafe") if given.dtype.kind in "biuf" else \
            np.array(data, dtype=dt.newbyteorder("="))
        if dt.kind in "iu" and given.dtype.kind in "iu" and given.size and (
                given.min() < np.iinfo(dt).min or given.max() > np.iinfo(dt).max):
            raise ValueError(f"values outside {datatype}'s range")
    except (ValueError, TypeError, OverflowError) as e:
        raise BadRequest(f"tensor {tensor!r}: data is not a list of {datatype} values ({e})") from None
    if arr.size != math.prod(shape):
        raise BadRequest(f"tensor {tensor!r}: {arr.size} values in data, but shape {list(shape)} needs "
                         f"{math.prod(shape)}")
    return arr.reshape(shape)


def to_json_data(arr: np.ndarray) -> list[Any]:
    """``arr`` flattened row-major, as JSON numbers (or booleans)."""
    return np.ascontiguousarray(arr).reshape(-1).tolist()
