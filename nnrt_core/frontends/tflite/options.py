"""Builtin operator options: the union table read as the class a mapper asks for."""
from __future__ import annotations

from typing import Any

import flatbuffers
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
#: options class -> its ``BuiltinOptions`` union code (looked up once per class)
_EXPECTED: dict[type, int | None] = {}


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
    obj.Init(buf, pos)  # the generated class's public initializer
    return obj
