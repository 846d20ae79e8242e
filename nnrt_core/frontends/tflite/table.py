"""A lean flatbuffer table reader for the tables of a TFLite model.

The ``tflite`` package's generated accessors cost several Python calls per
field; a model has hundreds of tensors and operators, so the per-tensor and
per-operator fields (``Tensor``, ``Buffer``, ``QuantizationParameters``,
``Operator``, ``SubGraph``, ``OperatorCode``, sparsity and signature defs)
are read here straight from the vtables.  The field offsets are the
schema's (vtable offset = 4 + 2 * field id); ``tests/test_tflite_frontend.py``
and ``tests/test_tflite_lean_reads.py`` check them against the ``tflite``
package.  Builtin options are read with the ``tflite`` classes, initialized
at positions found here.  Every read is bounds-checked by ``struct`` /
``np.frombuffer``: callers wrap them in
:func:`~nnrt_core.frontends.tflite.schema.guarded`.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

__all__ = ["Table", "Columns", "root", "MODEL", "SUBGRAPH", "TENSOR", "BUFFER", "QUANT", "OPERATOR", "OPCODE",
           "SPARSITY", "DIM_METADATA", "INDEX_VECTOR", "SIGNATURE", "TENSOR_MAP", "vector_at"]

_U8 = struct.Struct("<B").unpack_from
_I8 = struct.Struct("<b").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


class _Fields:
    """Vtable offsets of one table's fields, by name."""

    def __init__(self, **offsets: int) -> None:
        self.__dict__.update(offsets)


MODEL = _Fields(version=4, operator_codes=6, subgraphs=8, description=10, buffers=12, signature_defs=18)
SIGNATURE = _Fields(inputs=4, outputs=6, signature_key=8, subgraph_index=12)
TENSOR_MAP = _Fields(name=4, tensor_index=6)
SUBGRAPH = _Fields(tensors=4, inputs=6, outputs=8, operators=10, name=12)
TENSOR = _Fields(shape=4, type=6, buffer=8, name=10, quantization=12, is_variable=14, sparsity=16)
BUFFER = _Fields(data=4, offset=6, size=8)
QUANT = _Fields(scale=8, zero_point=10, quantized_dimension=16)
OPERATOR = _Fields(opcode_index=4, inputs=6, outputs=8, builtin_options_type=10, builtin_options=12)
OPCODE = _Fields(deprecated_builtin_code=4, custom_code=6, version=8, builtin_code=10)
SPARSITY = _Fields(traversal_order=4, block_map=6, dim_metadata=8)
DIM_METADATA = _Fields(format=4, dense_size=6, array_segments_type=8, array_segments=10, array_indices_type=12,
                       array_indices=14)
INDEX_VECTOR = _Fields(values=4)  #: ``Int32Vector``, ``Uint16Vector`` and ``Uint8Vector``


class Table:
    """One flatbuffer table at ``pos`` of ``buf``."""

    __slots__ = ("buf", "pos", "_vt", "_vt_len")

    def __init__(self, buf: Any, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        vt = pos - _I32(buf, pos)[0]
        if vt < 0:  # unpack_from would read from the end of the buffer
            raise ValueError(f"vtable position {vt} lies outside the buffer")
        self._vt = vt
        self._vt_len = _U16(buf, vt)[0]

    def _field(self, off: int) -> int:
        return _U16(self.buf, self._vt + off)[0] if off < self._vt_len else 0

    def u8(self, off: int, default: int = 0) -> int:
        o = self._field(off)
        return _U8(self.buf, self.pos + o)[0] if o else default

    def i8(self, off: int, default: int = 0) -> int:
        o = self._field(off)
        return _I8(self.buf, self.pos + o)[0] if o else default

    def i32(self, off: int, default: int = 0) -> int:
        o = self._field(off)
        return _I32(self.buf, self.pos + o)[0] if o else default

    def u32(self, off: int, default: int = 0) -> int:
        o = self._field(off)
        return _U32(self.buf, self.pos + o)[0] if o else default

    def u64(self, off: int, default: int = 0) -> int:
        o = self._field(off)
        return _U64(self.buf, self.pos + o)[0] if o else default

    def table(self, off: int) -> "Table | None":
        o = self._field(off)
        if not o:
            return None
        p = self.pos + o
        return Table(self.buf, p + _U32(self.buf, p)[0])

    def _vector(self, off: int) -> tuple[int, int]:
        """(position of the first element, length); (0, 0) when absent."""
        o = self._field(off)
        if not o:
            return 0, 0
        p = self.pos + o
        p += _U32(self.buf, p)[0]
        return p + 4, _U32(self.buf, p)[0]

    def string(self, off: int) -> bytes | None:
        start, n = self._vector(off)
        if not start:
            return None
        if start + n > len(self.buf):
            raise ValueError(f"string of {n} bytes at {start} lies outside the buffer")
        return bytes(self.buf[start:start + n])

    def numbers(self, off: int, dtype: Any) -> np.ndarray:
        """A vector of scalars as a numpy view (empty when absent); numpy refuses an extent outside ``buf``."""
        start, n = self._vector(off)
        if not start:
            return np.zeros(0, dtype)
        return np.frombuffer(self.buf, dtype=np.dtype(dtype).newbyteorder("<"), count=n, offset=start)

    def i32s(self, off: int) -> tuple[int, ...]:
        """A vector of int32 as Python ints (empty when absent): one ``struct`` call, no numpy array
        (shapes and operator inputs are short, and there are hundreds of them)."""
        start, n = self._vector(off)
        if not start:
            return ()
        if start + 4 * n > len(self.buf):
            raise ValueError(f"int32 vector of {n} entries at {start} lies outside the buffer")
        return struct.unpack_from(f"<{n}i", self.buf, start)

    def vector_position(self, off: int) -> tuple[int, int]:
        """(position, length) of a vector field, for byte vectors read elsewhere."""
        return self._vector(off)

    def table_at(self, off: int, k: int) -> "Table":
        """Table ``k`` of a table-vector field (``IndexError`` when out of range), without
        reading the others."""
        start, n = self._vector(off)
        if not 0 <= k < n:
            raise IndexError(f"table {k} of a vector of {n}")
        p = start + 4 * k
        return Table(self.buf, p + _U32(self.buf, p)[0])

    def tables(self, off: int) -> list["Table"]:
        start, n = self._vector(off)
        if start + 4 * n > len(self.buf):
            raise ValueError(f"table vector of {n} entries at {start} lies outside the buffer")
        offs = np.frombuffer(self.buf, dtype="<u4", count=n, offset=start) if n else ()
        return [Table(self.buf, start + 4 * k + int(o)) for k, o in enumerate(offs)]


def vector_at(buf: Any, pos: int, off: int) -> tuple[int, int]:
    """``Table(buf, pos).vector_position(off)`` without making the table (the quantization
    tables of fp16 models are mostly empty: one call tells)."""
    vt = pos - _I32(buf, pos)[0]
    if vt < 0:  # unpack_from would read from the end of the buffer
        raise ValueError(f"vtable position {vt} lies outside the buffer")
    o = _U16(buf, vt + off)[0] if off < _U16(buf, vt)[0] else 0
    if not o:
        return 0, 0
    p = pos + o
    p += _U32(buf, p)[0]
    return p + 4, _U32(buf, p)[0]


def root(buf: Any) -> Table:
    """The root table of a finished flatbuffer."""
    return Table(buf, _U32(buf, 0)[0])


_OFFSETS = {w: np.arange(w, dtype=np.int64) for w in (2, 4, 8)}
_WORDS = {2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


def _gather(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` bytes at every position of ``pos`` (int64)."""
    if pos.size and (int(pos.min()) < 0 or int(pos.max()) + width > buf.size):
        raise ValueError(f"a field of {width} bytes lies outside the buffer ({buf.size} bytes)")
    if width == 1:
        return buf[pos].astype(np.int64)
    # one gather of every field's bytes (n x width, C order), read as little-endian words
    return buf[pos[:, None] + _OFFSETS[width]].view(_WORDS[width])[:, 0].astype(np.int64)


class Columns:
    """The tables of one table-vector field read column-wise: every field of
    every table with a few numpy gathers instead of Python calls per table.
    Every position is bounds-checked (``ValueError``, callers guard it)."""

    def __init__(self, buf: np.ndarray, start: int, n: int) -> None:
        self.buf = buf  #: the file as uint8
        if start < 0 or start + 4 * n > buf.size:  # before allocating anything of length n
            raise ValueError(f"table vector of {n} entries at {start} lies outside the buffer")
        k = np.arange(n, dtype=np.int64)
        slots = start + 4 * k
        self.pos = slots + _gather(buf, slots, 4)
        soff = _gather(buf, self.pos, 4)
        self.vt = self.pos - np.where(soff >= 1 << 31, soff - (1 << 32), soff)  # the vtable (signed offset)
        self.vt_len = _gather(buf, self.vt, 2)

    def field(self, off: int) -> np.ndarray:
        """Absolute position of field ``off`` in every table, 0 where absent."""
        o = np.zeros(self.pos.size, np.int64)
        has = self.vt_len > off
        o[has] = _gather(self.buf, self.vt[has] + off, 2)
        return np.where(o != 0, self.pos + o, 0)

    def scalar(self, off: int, width: int, default: int = 0) -> np.ndarray:
        """An unsigned scalar field of every table (``default`` where absent)."""
        p = self.field(off)
        out = np.full(self.pos.size, default, np.int64)
        has = p != 0
        out[has] = _gather(self.buf, p[has], width)
        return out

    def ref(self, off: int) -> np.ndarray:
        """Position of the table, vector or string field ``off`` refers to, 0 where absent
        (a vector's or string's position is its length word)."""
        p = self.field(off)
        has = p != 0
        out = np.zeros(self.pos.size, np.int64)
        out[has] = p[has] + _gather(self.buf, p[has], 4)
        return out

    def lengths(self, refs: np.ndarray, itemsize: int) -> np.ndarray:
        """Lengths of the vectors/strings at ``refs`` (0 where absent), their data checked inside the buffer."""
        has = refs != 0
        n = np.zeros(self.pos.size, np.int64)
        n[has] = _gather(self.buf, refs[has], 4)
        if has.any() and int((refs[has] + 4 + itemsize * n[has]).max()) > self.buf.size:
            raise ValueError("a vector lies outside the buffer")
        return n
