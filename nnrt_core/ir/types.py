"""Value types of the IR: tensors (element type plus shape), sequences and optionals."""
from __future__ import annotations

from dataclasses import dataclass

from nnrt_core.ir.dtypes import DataType

__all__ = ["Dim", "TensorType", "SequenceType", "OptionalType", "ValueType"]

Dim = int | str | None  # static size, symbolic name, or unknown


@dataclass(frozen=True)
class TensorType:
    """Element type plus shape; ``shape is None`` means unknown rank."""

    dtype: DataType
    shape: tuple[Dim, ...] | None = None

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


@dataclass(frozen=True)
class SequenceType:
    elem: "ValueType | None"

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclass(frozen=True)
class OptionalType:
    elem: "ValueType | None"

    def __str__(self) -> str:
        return f"optional({self.elem})"


ValueType = TensorType | SequenceType | OptionalType
