"""Builtin operator options: the union table read as the class a mapper asks for."""
from __future__ import annotations

from typing import Any

import flatbuffers
import tflite

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.tflite.schema import guarded
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


def read_options(ctx: Any, cls: type) -> Any:
    """The options of ``ctx``'s operator as an instance of ``cls`` (a ``tflite`` options class);
    :class:`ModelLoadError` when the file stores options of another kind."""
    obj = cls()
    with guarded(f"{ctx.desc} options"):
        kind = ctx.op.u8(OPERATOR.builtin_options_type)
        table = ctx.op.table(OPERATOR.builtin_options) if kind else None
        if table is None:
            obj.Init(*_EMPTY)
            return obj
        expected = getattr(tflite.BuiltinOptions, cls.__name__, None)
        if kind != expected:
            raise ModelLoadError(f"{ctx.desc} stores {_UNION_NAMES.get(kind, kind)} options, expected {cls.__name__}")
        obj.Init(table.buf, table.pos)
    return obj
