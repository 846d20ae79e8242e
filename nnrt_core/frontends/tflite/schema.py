"""Reading a TFLite flatbuffer: the model, its tensors, buffers and operators.

Everything the flatbuffer says is checked before it is trusted: the file
identifier and schema version, every index (buffer, tensor, operator code),
every buffer's extent (inside the file), and every tensor's byte size against
its shape.  The ``tflite`` package's accessors raise ``struct.error`` /
``IndexError`` on garbage: :func:`guarded` turns that into ``ModelLoadError``.
Constant data are ``np.frombuffer`` views of the file bytes (no copy).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import tflite

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.tflite import table
from nnrt_core.ir import DataType

__all__ = ["FILE_IDENTIFIER", "SCHEMA_VERSION", "MAX_TENSOR_BYTES", "BULK_TENSORS", "BULK_OPERATORS", "BULK_BUFFERS",
           "TensorInfo", "Quant", "FlatModel",
           "guarded", "corrupt", "GUARDED_ERRORS", "looks_like_tflite", "BUILTIN_NAMES"]

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
#: no tensor of an imported model may be larger than this
MAX_TENSOR_BYTES = 1 << 32
#: from this many tensors on they are read column-wise (the numpy gathers cost ~0.15 ms however few:
#: 13 tensors 0.23 ms column-wise vs 0.09 one by one; 250 tensors 0.82 vs 1.08)
BULK_TENSORS = 96
#: from this many operators on their input and output lists are read column-wise
BULK_OPERATORS = 48
#: from this many buffers on the buffer tables are read column-wise (FlatModel() with 85-89 buffers:
#: ~114 us either way; 143 buffers 128 vs 173 us, 348 buffers 164 vs 337 us one table at a time)
BULK_BUFFERS = 100

#: builtin operator code -> name ("CONV_2D", ...)
BUILTIN_NAMES: dict[int, str] = {v: k for k, v in vars(tflite.BuiltinOperator).items()
                                 if not k.startswith("_") and isinstance(v, int)}

_DTYPES: dict[int, DataType] = {
    0: DataType.FLOAT, 1: DataType.FLOAT16, 2: DataType.INT32, 3: DataType.UINT8, 4: DataType.INT64,
    6: DataType.BOOL, 7: DataType.INT16, 8: DataType.COMPLEX64, 9: DataType.INT8, 10: DataType.DOUBLE, 12: DataType.UINT64,
    15: DataType.UINT32, 16: DataType.UINT16,
}
_TYPE_NAMES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_") and isinstance(v, int)}
_F32 = struct.Struct("<f").unpack_from
_I64 = struct.Struct("<q").unpack_from
_LE_F32, _LE_I64 = np.dtype("<f4"), np.dtype("<i8")
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce  # half the cost of the ``min()`` / ``max()`` methods
#: TFLite type code -> (IR type, numpy dtype, item size), looked up once per tensor
_TYPE_FACTS = {k: (d, d.numpy, d.numpy.itemsize) for k, d in _DTYPES.items()}


def looks_like_tflite(data: bytes | bytearray | memoryview) -> bool:
    """True when ``data`` carries the TFLite file identifier at bytes 4..8."""
    return len(data) >= 8 and bytes(data[4:8]) == FILE_IDENTIFIER


#: what the flatbuffer accessors raise on a corrupt file
GUARDED_ERRORS = (struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError,
                  AttributeError, MemoryError)


def corrupt(what: str, e: BaseException) -> ModelLoadError:
    """The ``ModelLoadError`` for accessor error ``e`` while reading ``what``."""
    return ModelLoadError(f"TFLite model is corrupt: {what}: {type(e).__name__}: {e}")


class guarded:  # noqa: N801 - used like a function: ``with guarded("tensor tables"):``
    """Turn the errors a corrupt flatbuffer raises in the accessors into ``ModelLoadError``
    (a class, not a ``@contextmanager``: an import opens it ~10 times, ~2 µs less each)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, e: BaseException | None, tb: Any) -> None:
        if e is not None and not isinstance(e, ModelLoadError) and isinstance(e, GUARDED_ERRORS):
            raise corrupt(self.what, e) from e


@dataclass(frozen=True, slots=True)
class Quant:
    """Affine quantization of a tensor: ``real = scale * (q - zero_point)``;
    ``axis`` is the quantized dimension (per-axis) or ``None`` (per-tensor)."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None


@dataclass(slots=True)
class TensorInfo:
    """One tensor of a subgraph as the flatbuffer declares it (shape in NHWC when 4-D)."""

    index: int
    name: str
    dtype: DataType
    shape: tuple[int, ...]
    data: np.ndarray | None  #: constant data (a view of the file bytes), else ``None``
    quant: Quant | None
    sparse: table.Table | None  #: the ``SparsityParameters`` table of a sparse constant

    @property
    def desc(self) -> str:
        return f"tensor {self.index} {self.name!r}"


class FlatModel:
    """A parsed and checked TFLite model over ``data`` (kept alive by the arrays)."""

    def __init__(self, data: bytes, what: str = "<bytes>") -> None:
        if len(data) < 8:
            raise ModelLoadError(f"{what} is not a TFLite model: {len(data)} bytes is too short for a flatbuffer")
        if not looks_like_tflite(data):
            raise ModelLoadError(f"{what} is not a TFLite model: file identifier {bytes(data[4:8])!r}, "
                                 f"expected {FILE_IDENTIFIER!r}")
        self.data = data
        self.what = what
        self.real_path: str | None = None  #: the resolved path of the file read (``read_flat_model``)
        self.buf = np.frombuffer(data, dtype=np.uint8)
        self._operators: dict[int, list[table.Table]] = {}
        self._op_names: dict[int, list[tuple[str, bool]]] = {}
        self._op_cols: dict[int, table.Columns | None] = {}
        with guarded("model header"):
            root_pos = struct.unpack_from("<I", data, 0)[0]
            if root_pos + 4 > len(data):
                raise ModelLoadError(f"{what}: root table offset {root_pos} is outside the file ({len(data)} bytes)")
            self.root = table.root(data)
            version = self.root.u32(table.MODEL.version)
            if version != SCHEMA_VERSION:
                raise ModelLoadError(f"{what}: unknown TFLite schema version {version} (expected {SCHEMA_VERSION})")
            self.subgraphs = self.root.tables(table.MODEL.subgraphs)
            self.n_subgraphs = len(self.subgraphs)
            self.op_codes = [_op_code(oc) for oc in self.root.tables(table.MODEL.operator_codes)]
            #: every buffer's (start in the file, size), ``None`` when empty, or why it cannot be read
            self.buffers = self._buffers_bulk()
            if self.buffers is None:  # few buffers, or a corrupt table: one table at a time (names it)
                self.buffers = [self._read_buffer(b, i) for i, b in enumerate(self.root.tables(table.MODEL.buffers))]
            self.n_buffers = len(self.buffers)
            self._address = self.buf.ctypes.data  #: where the file's bytes are (alignment of views)
        if self.n_subgraphs < 1:
            raise ModelLoadError(f"{what}: the model has no subgraph")

    # ------------------------------------------------------------------ tensors
    def tensors(self, sg: table.Table, bulk: bool = True) -> list[TensorInfo]:
        """Every tensor of subgraph ``sg``, checked: from :data:`BULK_TENSORS` tensors on, the
        tables are read column-wise (:class:`~nnrt_core.frontends.tflite.table.Columns`); on a
        corrupt table (or ``bulk=False``) one table at a time, which names the corrupt tensor in its error."""
        try:
            if bulk and sg.vector_position(table.SUBGRAPH.tensors)[1] >= BULK_TENSORS:
                return self._tensors_bulk(sg)
        except GUARDED_ERRORS:
            pass
        out = []
        with guarded("tensor list"):
            tables = sg.tables(table.SUBGRAPH.tensors)
        for i, t in enumerate(tables):
            try:  # guarded() per tensor, without a context manager's cost
                out.append(self._tensor(t, i))
            except GUARDED_ERRORS as e:
                raise corrupt(f"tensor {i}", e) from e
        return out

    def _tensors_bulk(self, sg: table.Table) -> list[TensorInfo]:
        f = table.TENSOR
        start, n = sg.vector_position(table.SUBGRAPH.tensors)
        cols = table.Columns(self.buf, start, n)
        ttypes = cols.scalar(f.type, 1).tolist()
        buffers = cols.scalar(f.buffer, 4).tolist()
        name_at, shape_at = cols.ref(f.name), cols.ref(f.shape)
        name_len, shape_len = cols.lengths(name_at, 1).tolist(), cols.lengths(shape_at, 4).tolist()
        sp_at, q_at = cols.ref(f.sparsity).tolist(), cols.ref(f.quantization).tolist()
        data, unpack = self.data, struct.unpack_from
        out = []
        for i, (na, nl, sa, sl) in enumerate(zip(name_at.tolist(), name_len, shape_at.tolist(), shape_len)):
            raw_name = data[na + 4:na + 4 + nl] if na else None
            shape = unpack(f"<{sl}i", data, sa + 4) if sa else ()
            out.append(self._info(i, raw_name, ttypes[i], shape, buffers[i], sp_at[i], q_at[i]))
        return out

    def _tensor(self, t: table.Table, i: int) -> TensorInfo:
        f = table.TENSOR
        raw_name, ttype = t.string(f.name), t.u8(f.type)
        if ttype not in _DTYPES:  # a resource handle or an unsupported type: nothing else is read
            return self._info(i, raw_name, ttype, (), 0, 0, 0)
        sp, q = t.table(f.sparsity), t.table(f.quantization)
        return self._info(i, raw_name, ttype, t.i32s(f.shape), t.u32(f.buffer), sp.pos if sp else 0,
                          q.pos if q else 0)

    def _info(self, i: int, raw_name: bytes | None, ttype: int, shape: tuple[int, ...], buffer: int,
              sparsity_at: int, quant_at: int) -> TensorInfo:
        """Tensor ``i`` from its fields (tables given by position, 0: absent), checked."""
        name = raw_name.decode("utf-8", "replace") if raw_name else f"tensor_{i}"
        facts = _TYPE_FACTS.get(ttype)
        if facts is None:
            if ttype == 13:  # RESOURCE: a variable handle (ops/variables.py), no data
                return TensorInfo(i, name, DataType.UNDEFINED, (), None, None, None)
            raise ModelLoadError(f"{_Desc(i, name)}: element type {_TYPE_NAMES.get(ttype, ttype)} is not supported "
                                 f"(supported: {sorted(_TYPE_NAMES[k] for k in _DTYPES)})")
        dtype, np_dtype, itemsize = facts
        if shape and min(shape) < 0:
            raise ModelLoadError(f"{_Desc(i, name)}: shape {list(shape)} has a negative dimension")
        nbytes = math.prod(shape) * itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise ModelLoadError(f"{_Desc(i, name)}: shape {list(shape)} needs {nbytes} bytes, over the limit "
                                 f"of {MAX_TENSOR_BYTES}")
        sparse = data = quant = None
        if sparsity_at:
            sparse = table.Table(self.data, sparsity_at)
        extent = self._buffer(buffer, i, name) if buffer else None
        if extent is not None:
            start, size = extent
            if sparse is not None:
                data = self.buf[start:start + size]
            elif size != nbytes:
                raise ModelLoadError(f"{_Desc(i, name)}: shape {list(shape)} of {dtype.name.lower()} needs {nbytes} "
                                     f"bytes but its buffer holds {size}")
            elif (self._address + start) % itemsize == 0:  # a view of the file bytes, in one call
                data = np.ndarray(shape, np_dtype, self.buf, start)
            else:  # unaligned buffer: one copy
                data = self.buf[start:start + size].copy().view(np_dtype).reshape(shape)
        if quant_at:
            quant = self._quant(self.data, quant_at, i, name, shape)
        return TensorInfo(i, name, dtype, shape, data, quant, sparse)

    def _buffers_bulk(self) -> list[tuple[int, int] | str | None] | None:
        """:meth:`_read_buffer` of every buffer table, read column-wise (from :data:`BULK_BUFFERS`
        buffers on); ``None`` below that or when a table or its data lies outside the file."""
        try:
            start, n = self.root.vector_position(table.MODEL.buffers)
            if n < BULK_BUFFERS:
                return None
            f, cols = table.BUFFER, table.Columns(self.buf, start, n)
            offsets, sizes = cols.scalar(f.offset, 8), cols.scalar(f.size, 8)
            data_at = cols.ref(f.data)
            lengths = cols.lengths(data_at, 1)
        except GUARDED_ERRORS:
            return None
        if (offsets < 0).any() or (sizes < 0).any():  # over 2**63: the one-table reader reports them
            return None
        out: list[tuple[int, int] | str | None] = []
        end = len(self.data)
        for i, (off, size, at, m) in enumerate(zip(offsets.tolist(), sizes.tolist(), data_at.tolist(),
                                                   lengths.tolist())):
            if off > 1:
                out.append(self._read_buffer(self.root.table_at(table.MODEL.buffers, i), i) if off + size > end
                           else (off, size) if size else None)
            else:
                out.append((at + 4, m) if m else None)  # lengths() checked the data inside the file
        return out

    def _read_buffer(self, b: table.Table, index: int) -> tuple[int, int] | str | None:
        """Buffer ``index`` as its (start, size) in the file, ``None`` when empty, or
        the reason it lies outside the file (raised for the tensors that use it)."""
        offset, size = b.u64(table.BUFFER.offset), b.u64(table.BUFFER.size)
        if offset > 1:  # data stored after the flatbuffer (large models)
            if offset + size > len(self.data):
                return f"buffer {index} at offset {offset} with {size} bytes lies outside the file ({len(self.data)} bytes)"
            return (offset, size) if size else None
        start, n = b.vector_position(table.BUFFER.data)
        if n == 0:
            return None
        if start + n > len(self.data):
            return f"buffer {index} ({n} bytes) lies outside the file ({len(self.data)} bytes)"
        return start, n

    def _buffer(self, index: int, i: int, name: str) -> tuple[int, int] | None:
        """(start, size) of buffer ``index`` in the file (``None``: empty), checked."""
        if index >= self.n_buffers:
            raise ModelLoadError(f"{_Desc(i, name)}: buffer index {index} is out of range ({self.n_buffers} buffers)")
        extent = self.buffers[index]
        if isinstance(extent, str):
            raise ModelLoadError(f"{_Desc(i, name)}: {extent}")
        return extent

    @staticmethod
    def _quant(data: bytes, quant_at: int, i: int, name: str, shape: tuple[int, ...]) -> Quant | None:
        """The quantization of tensor ``i`` from its table at ``quant_at``, checked."""
        s_at, ns = table.vector_at(data, quant_at, table.QUANT.scale)
        if not ns:  # no scales: not quantized (fp16 models give most tensors such a table)
            return None
        q, desc = table.Table(data, quant_at), _Desc(i, name)
        z_at, nz = q.vector_position(table.QUANT.zero_point)
        if ns == 1 and nz <= 1:  # per-tensor (most tensors of an int8 model): two struct reads, no numpy calls
            s = _F32(q.buf, s_at)[0]
            if not (math.isfinite(s) and s > 0):
                raise ModelLoadError(f"{desc}: quantization scales must be finite and positive, got {[s]}")
            return Quant(np.array(s, np.float32), np.array(_I64(q.buf, z_at)[0] if nz else 0, np.int64), None)
        # native copies of the little-endian vectors (numpy refuses an extent outside the buffer)
        scale = np.frombuffer(q.buf, _LE_F32, ns, s_at).astype(np.float32)
        if nz and nz != ns:
            raise ModelLoadError(f"{desc}: quantization has {ns} scales but {nz} zero points")
        zp = np.frombuffer(q.buf, _LE_I64, nz, z_at).astype(np.int64) if nz else np.zeros(ns, np.int64)
        if not (_MIN(scale) > 0 and _MAX(scale) < math.inf):  # NaN fails both
            raise ModelLoadError(f"{desc}: quantization scales must be finite and positive, got {scale[:8].tolist()}")
        if scale.size == 1:
            return Quant(scale.reshape(()), zp.reshape(()), None)
        axis = q.i32(table.QUANT.quantized_dimension)
        if not 0 <= axis < len(shape) or shape[axis] != scale.size:
            raise ModelLoadError(f"{desc}: {scale.size} per-axis scales on dimension {axis} do not fit shape "
                                 f"{list(shape)}")
        return Quant(scale, zp, axis)

    # --------------------------------------------------------------- structure
    def subgraph(self, k: int) -> table.Table:
        return self.subgraphs[k]

    def operators(self, sg: table.Table) -> list[table.Table]:
        """The operator tables of ``sg`` (read once per subgraph: import reads them three times)."""
        ops = self._operators.get(sg.pos)
        if ops is None:
            with guarded("operator list"):
                ops = self._operators[sg.pos] = sg.tables(table.SUBGRAPH.operators)
        return ops

    def op_names(self, sg: table.Table) -> list[tuple[str, bool]]:
        """(name, is_custom) of every operator of ``sg``, its operator code index checked (read once per subgraph)."""
        names = self._op_names.get(sg.pos)
        if names is None:
            names = self._op_names_bulk(sg)
        if names is None:
            names = []
            with guarded("operators"):
                for k, op in enumerate(self.operators(sg)):
                    idx = op.u32(table.OPERATOR.opcode_index)
                    if not 0 <= idx < len(self.op_codes):
                        raise ModelLoadError(f"operator {k} uses operator code {idx}; the model has {len(self.op_codes)}")
                    names.append(self.op_codes[idx])
            self._op_names[sg.pos] = names
        return names

    def _op_columns(self, sg: table.Table) -> table.Columns | None:
        """The operator tables of ``sg`` read column-wise (from :data:`BULK_OPERATORS` on; ``None``
        below that or when corrupt: the one-table readers then name the operator)."""
        if sg.pos not in self._op_cols:
            try:
                start, n = sg.vector_position(table.SUBGRAPH.operators)
                self._op_cols[sg.pos] = table.Columns(self.buf, start, n) if n >= BULK_OPERATORS else None
            except GUARDED_ERRORS:
                self._op_cols[sg.pos] = None
        return self._op_cols[sg.pos]

    def _op_names_bulk(self, sg: table.Table) -> list[tuple[str, bool]] | None:
        cols = self._op_columns(sg)
        if cols is None:
            return None
        try:
            idx = cols.scalar(table.OPERATOR.opcode_index, 4)
        except GUARDED_ERRORS:
            return None
        if idx.size and int(idx.max()) >= len(self.op_codes):
            return None  # the one-table reader names the operator
        codes = self.op_codes
        names = self._op_names[sg.pos] = [codes[i] for i in idx.tolist()]
        return names

    def operator_io(self, sg: table.Table) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
        """(inputs, outputs) of every operator of ``sg``, read column-wise from :data:`BULK_OPERATORS`
        operators on (``None`` below that, or when a table is corrupt: the caller then reads each
        operator's own lists, and the error names the operator)."""
        cols = self._op_columns(sg)
        if cols is None:
            return None
        try:
            f = table.OPERATOR
            ins_at, outs_at = cols.ref(f.inputs), cols.ref(f.outputs)
            ins_n, outs_n = cols.lengths(ins_at, 4).tolist(), cols.lengths(outs_at, 4).tolist()
        except GUARDED_ERRORS:
            return None
        data, unpack = self.data, struct.unpack_from
        return [(unpack(f"<{ni}i", data, ia + 4) if ia else (), unpack(f"<{no}i", data, oa + 4) if oa else ())
                for ia, ni, oa, no in zip(ins_at.tolist(), ins_n, outs_at.tolist(), outs_n)]

    def signatures(self) -> list[dict[str, object]]:
        """The signature defs: key, subgraph index, input and output names."""
        out = []
        with guarded("signature defs"):
            f, name = table.SIGNATURE, table.TENSOR_MAP.name
            for i, s in enumerate(self.root.tables(table.MODEL.signature_defs)):
                key = s.string(f.signature_key)
                out.append({
                    "key": key.decode("utf-8", "replace") if key else f"signature_{i}",
                    "subgraph": s.u32(f.subgraph_index),
                    "inputs": [_text(m.string(name)) for m in s.tables(f.inputs)],
                    "outputs": [_text(m.string(name)) for m in s.tables(f.outputs)],
                })
        return out

    def description(self) -> str:
        with guarded("model description"):
            return _text(self.root.string(table.MODEL.description))

    def subgraph_names(self) -> list[str]:
        with guarded("subgraph names"):
            return [_text(sg.string(table.SUBGRAPH.name)) or f"subgraph_{k}" for k, sg in enumerate(self.subgraphs)]


class _Desc:
    """``tensor {i} {name!r}`` for error messages, formatted only when one is raised."""

    __slots__ = ("i", "name")

    def __init__(self, i: int, name: str) -> None:
        self.i, self.name = i, name

    def __str__(self) -> str:
        return f"tensor {self.i} {self.name!r}"


def _op_code(oc: table.Table) -> tuple[str, bool]:
    """(builtin name or custom code, is_custom) of an ``OperatorCode`` table: the larger of
    its deprecated int8 code and its int32 code (which counts from 127 on, as the
    ``tflite`` package's ``BuiltinCode()`` reads it)."""
    deprecated = oc.i8(table.OPCODE.deprecated_builtin_code)
    code = oc.i32(table.OPCODE.builtin_code)
    code = max(code if code >= tflite.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES else deprecated, deprecated)
    name = BUILTIN_NAMES.get(code)
    if name == "CUSTOM":
        custom = oc.string(table.OPCODE.custom_code)
        return (custom.decode("utf-8", "replace") if custom else "<unnamed custom op>"), True
    return (name or f"<unknown builtin {code}>"), False


def _text(b: bytes | None) -> str:
    return b.decode("utf-8", "replace") if b else ""
