"""Builtin operator options: the union table read as the class a mapper asks for."""
from __future__ import annotations

import struct
from typing import Any

import flatbuffers
import flatbuffers.table
import tflite

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.tflite.schema import GUARDED_ERRORS, corrupt
from nnrt_core.frontends.tflite.table import OPERATOR

__all__ = ["read_options", "ACTIVATIONS"]

#: fused activation codes (``tflite.ActivationFunctionType``) -> name
ACTIVATIONS = {v: k for k, v in vars(tflite.ActivationFunctionType).items() if not k.startswith("_")}

_UNION_NAMES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}


def _empty_table() -> tuple[bytes, int]:
    """A flatbuffer holding one table with no fields: every accessor answers its default."""
    b = flatbuffers.Builder(16)
    b.StartObject(0)
    b.Finish(b.EndObject())
    data = bytes(b.Output())
    return data, flatbuffers.encode.Get(flatbuffers.packer.uoffset, data, 0)


_EMPTY = _empty_table()
_I32 = struct.Struct("<i").unpack_from
_U16 = struct.Struct("<H").unpack_from


class _FastTable(flatbuffers.table.Table):
    """``flatbuffers``' table with the two accessors every options getter calls made
    cheaper (no memoryview and no range check object per read): the same values, and
    on a corrupt file the same kinds of errors (``struct.error``, ``ValueError``)."""

    __slots__ = ("_vt", "_vt_len")

    def __init__(self, buf: Any, pos: int) -> None:  # noqa: D107 - no range check object: positions come from table.py
        self.Bytes, self.Pos = buf, pos
        self._vt = -1  #: the vtable's position and length, read at the first field (an options getter reads several)
        self._vt_len = 0

    def Offset(self, vtableOffset: int) -> int:  # noqa: N802, N803  (flatbuffers' names)
        buf, vtable = self.Bytes, self._vt
        if vtable < 0:
            vtable = self.Pos - _I32(buf, self.Pos)[0]
            if vtable < 0:  # unpack_from would read from the end of the buffer
                raise ValueError(f"vtable position {vtable} lies outside the buffer")
            self._vt_len = _U16(buf, vtable)[0]
            self._vt = vtable
        if vtableOffset < self._vt_len:
            return _U16(buf, vtable + vtableOffset)[0]
        return 0

    def Get(self, flags: Any, off: int) -> Any:  # noqa: N802
        if off < 0:
            raise ValueError(f"field position {off} lies outside the buffer")
        return flags.py_type(flags.packer_type.unpack_from(self.Bytes, off)[0])


#: options class -> its ``BuiltinOptions`` union code (looked up once per class)
_EXPECTED: dict[type, int | None] = {}
#: options class -> whether its ``Init`` makes a plain ``flatbuffers`` table (every generated
#: class: then the :class:`_FastTable` is set without calling ``Init``)
_PLAIN_INIT: dict[type, bool] = {}


def _plain_init(cls: type) -> bool:
    got = _PLAIN_INIT.get(cls)
    if got is None:
        probe = cls()
        probe.Init(*_EMPTY)
        got = _PLAIN_INIT[cls] = type(getattr(probe, "_tab", None)) is flatbuffers.table.Table
    return got


def read_options(ctx: Any, cls: type) -> Any:
    """The options of ``ctx``'s operator as an instance of ``cls`` (a ``tflite`` options class);
    :class:`ModelLoadError` when the file stores options of another kind."""
    obj = cls()
    try:  # guarded(), without a context manager's cost
        kind = ctx.op.u8(OPERATOR.builtin_options_type)
        table = ctx.op.table(OPERATOR.builtin_options) if kind else None
    except GUARDED_ERRORS as e:
        raise corrupt(f"{ctx.desc} options", e) from e
    if table is None:
        buf, pos = _EMPTY
    else:
        expected = _EXPECTED.get(cls, -1)
        if expected == -1:
            expected = _EXPECTED[cls] = getattr(tflite.BuiltinOptions, cls.__name__, None)
        if kind != expected:
            raise ModelLoadError(f"{ctx.desc} stores {_UNION_NAMES.get(kind, kind)} options, expected {cls.__name__}")
        buf, pos = table.buf, table.pos
    if _plain_init(cls):  # every generated class: what its Init makes, with the cheaper accessors
        obj._tab = _FastTable(buf, pos)
    else:  # anything else keeps its own
        obj.Init(buf, pos)
    return obj
