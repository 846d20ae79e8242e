"""Element types ORT's numpy bridge cannot carry (bfloat16, float8, 4/2-bit).

``InferenceSession.run`` refuses ``ml_dtypes`` arrays and cannot return such
outputs; these helpers move them through ``OrtValue`` s by raw bytes instead
(sub-byte types are packed/unpacked the ONNX way: first element in the low
bits).  Only used by partitions whose boundary carries such a type.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from nnrt_core.ir.dtypes import DataType

__all__ = ["EXOTIC_BY_ORT_TYPE", "BITS", "to_ortvalue", "from_ortvalue"]

#: ORT type string -> ONNX element type, for element types numpy can't exchange with ORT
EXOTIC_BY_ORT_TYPE: dict[str, int] = {
    "tensor(bfloat16)": 16,
    "tensor(float8e4m3fn)": 17,
    "tensor(float8e4m3fnuz)": 18,
    "tensor(float8e5m2)": 19,
    "tensor(float8e5m2fnuz)": 20,
    "tensor(uint4)": 21,
    "tensor(int4)": 22,
    "tensor(float4e2m1)": 23,
    "tensor(float8e8m0)": 24,
    "tensor(uint2)": 25,
    "tensor(int2)": 26,
}
#: bits per element of the packed (sub-byte) types
BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}


def _pack(arr: np.ndarray, bits: int) -> np.ndarray:
    per = 8 // bits
    mask = (1 << bits) - 1
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8) & mask
    pad = (-flat.size) % per
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, np.uint8)])
    flat = flat.reshape(-1, per)
    out = np.zeros(flat.shape[0], np.uint8)
    for i in range(per):
        out |= (flat[:, i] << (i * bits)).astype(np.uint8)
    return out


def _unpack(raw: np.ndarray, bits: int, count: int) -> np.ndarray:
    per = 8 // bits
    mask = (1 << bits) - 1
    parts = [(raw >> (i * bits)) & mask for i in range(per)]
    return np.stack(parts, axis=1).reshape(-1)[:count].astype(np.uint8)


def to_ortvalue(arr: Any, elem: int, device: str = "cpu", device_id: int = 0):
    """A host array of ONNX element type ``elem`` as a (CPU) OrtValue."""
    import onnxruntime as ort

    arr = np.asarray(arr)
    want = DataType(elem).numpy
    if arr.dtype != want:
        arr = arr.astype(want)
    ov = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), elem, "cpu", 0)
    raw = _pack(arr, BITS[elem]) if elem in BITS else np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    n = min(raw.nbytes, ov.tensor_size_in_bytes())
    if n:
        ctypes.memmove(ov.data_ptr(), raw.ctypes.data, n)
    return ov


def from_ortvalue(ov: Any, elem: int) -> np.ndarray:
    """A CPU OrtValue of ONNX element type ``elem`` as a host ``ml_dtypes`` array."""
    shape = tuple(ov.shape())
    nbytes = ov.tensor_size_in_bytes()
    raw = np.empty(nbytes, np.uint8)
    if nbytes:
        ctypes.memmove(raw.ctypes.data, ov.data_ptr(), nbytes)
    want = DataType(elem).numpy
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if elem in BITS:
        return _unpack(raw, BITS[elem], count).view(want).reshape(shape)
    return raw.view(want).reshape(shape)
