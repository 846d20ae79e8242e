"""The weights region of an exported model: large initializers left out as
ONNX external data, laid out at aligned offsets (no ``onnx`` needed to hold
or read one; building the references imports it)."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ExternalWeights"]


class ExternalWeights:
    """Collects large initializers left out of an exported model.

    Each one is written as an ONNX external-data reference (``location``,
    ``offset``, ``length``) into a virtual region where every tensor starts on
    a 64-byte boundary; the arrays themselves stay ours (``names`` /
    ``arrays``), to be handed to a runtime in memory (ORT's
    ``add_external_initializers``) or written out by :meth:`region`."""

    ALIGN = 64

    def __init__(self, location: str, min_bytes: int = 1024) -> None:
        self.location = location
        self.min_bytes = min_bytes
        self.names: list[str] = []
        self.arrays: list[np.ndarray] = []
        self.offsets: list[int] = []
        self.size = 0

    def take(self, arr: np.ndarray, name: str) -> Any:
        """An external reference for ``arr`` (a ``TensorProto``), or None to
        store it inline (small, or a dtype without a plain ONNX byte layout)."""
        from nnrt_core.frontends.onnx import proto_build as helper
        from nnrt_core.frontends.onnx.onnx_api import P

        if arr.nbytes < self.min_bytes or arr.dtype.type not in _PLAIN_DTYPES or not arr.dtype.isnative:
            return None
        arr = np.ascontiguousarray(arr)
        off = -(-self.size // self.ALIGN) * self.ALIGN
        t = P.TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(arr.dtype), dims=arr.shape)
        t.data_location = P.TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", str(off)), ("length", str(arr.nbytes))):
            t.external_data.add(key=key, value=value)
        self.names.append(name)
        self.arrays.append(arr)
        self.offsets.append(off)
        self.size = off + arr.nbytes
        return t

    def region(self) -> bytes:
        """The weights laid out at their offsets (one copy, for writing to a file)."""
        buf = bytearray(self.size)
        for arr, off in zip(self.arrays, self.offsets):
            buf[off:off + arr.nbytes] = arr.view(np.uint8).reshape(-1).data
        return bytes(buf)


_PLAIN_DTYPES = frozenset({np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                           np.uint8, np.uint16, np.uint32, np.uint64, np.bool_})
