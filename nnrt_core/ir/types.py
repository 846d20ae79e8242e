"""Value types of the IR: tensors (element type plus shape), sequences and optionals."""
from __future__ import annotations

from nnrt_core.ir.dtypes import DataType
from nnrt_core.record import FrozenRecord

__all__ = ["Dim", "TensorType", "SequenceType", "OptionalType", "ValueType"]

Dim = int | str | None  # static size, symbolic name, or unknown


class TensorType(FrozenRecord):
    """Element type plus shape; ``shape is None`` means unknown rank."""

    __slots__ = ("dtype", "shape")
    dtype: DataType
    shape: tuple[Dim, ...] | None

    def __init__(self, dtype: DataType, shape: tuple[Dim, ...] | None = None) -> None:
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", shape)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.dtype.name.lower()}[?]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.name.lower()}[{dims}]"


class SequenceType(FrozenRecord):
    __slots__ = ("elem",)
    elem: "ValueType | None"

    def __init__(self, elem: "ValueType | None") -> None:
        object.__setattr__(self, "elem", elem)

    def __str__(self) -> str:
        return f"seq({self.elem})"


class OptionalType(FrozenRecord):
    __slots__ = ("elem",)
    elem: "ValueType | None"

    def __init__(self, elem: "ValueType | None") -> None:
        object.__setattr__(self, "elem", elem)

    def __str__(self) -> str:
        return f"optional({self.elem})"


ValueType = TensorType | SequenceType | OptionalType
