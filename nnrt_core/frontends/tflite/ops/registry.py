"""The operator registry: TFLite operator name -> mapper.

A mapper is ``fn(ctx: OpContext) -> None``: it reads its inputs from ``ctx``,
adds IR nodes and records its outputs with ``ctx.set_out``.  Builtin mappers
register under the builtin name (``"CONV_2D"``); a plugin claims a custom
operator with ``register_op("MyCustomOp", fn, custom=True)`` (see docs/tflite.md).
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["Mapper", "Shortcut", "register", "register_op", "unregister_op", "mapper_for", "shortcut",
           "shortcut_for", "available_ops", "custom_ops"]

Mapper = Callable[[Any], None]
#: ``fn(state, inputs, outputs) -> bool``: a mapper's common case without an ``OpContext``;
#: False when it does not apply (the mapper then runs as usual)
Shortcut = Callable[[Any, "tuple[int, ...]", "tuple[int, ...]"], bool]

_BUILTIN: dict[str, Mapper] = {}
_CUSTOM: dict[str, Mapper] = {}
#: keyed by the mapper, so a mapper replaced with ``register_op`` loses its shortcut
_SHORTCUTS: dict[Mapper, Shortcut] = {}


def register(*names: str) -> Callable[[Mapper], Mapper]:
    """Decorator: register a builtin mapper under one or more builtin operator names."""
    def deco(fn: Mapper) -> Mapper:
        for n in names:
            _BUILTIN[n] = fn
        return fn
    return deco


def register_op(name: str, mapper: Mapper, *, custom: bool = True, replace: bool = False) -> None:
    """Register ``mapper`` for custom operator ``name`` (or a builtin one with
    ``custom=False``).  A name already registered needs ``replace=True``."""
    table = _CUSTOM if custom else _BUILTIN
    if not callable(mapper):
        raise TypeError(f"mapper for {name!r} must be callable, got {type(mapper).__name__}")
    if name in table and not replace:
        raise ValueError(f"TFLite {'custom ' if custom else ''}operator {name!r} already has a mapper "
                         "(pass replace=True to override it)")
    table[name] = mapper


def unregister_op(name: str, *, custom: bool = True) -> None:
    """Remove the mapper of ``name`` (nothing when there is none)."""
    (_CUSTOM if custom else _BUILTIN).pop(name, None)


def shortcut(mapper: Mapper) -> Callable[[Shortcut], Shortcut]:
    """Decorator: register a shortcut for ``mapper``'s most common case."""
    def deco(fn: Shortcut) -> Shortcut:
        _SHORTCUTS[mapper] = fn
        return fn
    return deco


def shortcut_for(mapper: Mapper) -> Shortcut | None:
    return _SHORTCUTS.get(mapper)


def mapper_for(name: str, custom: bool) -> Mapper | None:
    return (_CUSTOM if custom else _BUILTIN).get(name)


def available_ops() -> list[str]:
    """The builtin operator names the frontend maps, sorted."""
    return sorted(_BUILTIN)


def custom_ops() -> list[str]:
    """The custom operator names claimed by plugins, sorted."""
    return sorted(_CUSTOM)
