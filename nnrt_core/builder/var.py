"""``Var``: a value of the graph a builder is making (input, constant or node output)."""
from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from nnrt_core.builder.schema import BuilderError
from nnrt_core.ir import DataType, Dim, Value, ValueType

__all__ = ["Operand", "Var", "VarOwner"]


class VarOwner(Protocol):
    """What a :class:`Var` needs of the builder it belongs to."""

    @property
    def name(self) -> str: ...

    def add(self, a: Any, b: Any) -> Var: ...

    def sub(self, a: Any, b: Any) -> Var: ...

    def mul(self, a: Any, b: Any) -> Var: ...

    def div(self, a: Any, b: Any) -> Var: ...

    def matmul(self, a: Any, b: Any) -> Var: ...

    def neg(self, x: Any) -> Var: ...


class Var:
    """A value of the graph being built: a graph input, a constant or a node
    output.  Carries its element type and shape; supports ``+ - * / @`` and
    unary ``-`` (each adds a node to the builder it belongs to)."""

    __slots__ = ("builder", "value")

    def __init__(self, builder: VarOwner, value: Value) -> None:
        self.builder = builder
        self.value = value

    @property
    def name(self) -> str:
        return self.value.name

    @property
    def type(self) -> ValueType | None:
        return self.value.type

    @property
    def dtype(self) -> DataType | None:
        return self.value.dtype

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        return self.value.shape

    @property
    def rank(self) -> int | None:
        shape = self.shape
        return None if shape is None else len(shape)

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.type if self.type is not None else '?'})"

    def __add__(self, other: Any) -> "Var":
        return self.builder.add(self, other)

    def __radd__(self, other: Any) -> "Var":
        return self.builder.add(other, self)

    def __sub__(self, other: Any) -> "Var":
        return self.builder.sub(self, other)

    def __rsub__(self, other: Any) -> "Var":
        return self.builder.sub(other, self)

    def __mul__(self, other: Any) -> "Var":
        return self.builder.mul(self, other)

    def __rmul__(self, other: Any) -> "Var":
        return self.builder.mul(other, self)

    def __truediv__(self, other: Any) -> "Var":
        return self.builder.div(self, other)

    def __rtruediv__(self, other: Any) -> "Var":
        return self.builder.div(other, self)

    def __matmul__(self, other: Any) -> "Var":
        return self.builder.matmul(self, other)

    def __rmatmul__(self, other: Any) -> "Var":
        return self.builder.matmul(other, self)

    def __neg__(self) -> "Var":
        return self.builder.neg(self)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise BuilderError(f"value {self.name!r} is symbolic; it has no truth value while the graph is built")


Operand = Var | np.ndarray | np.generic | int | float | bool | Sequence[Any]
