"""Rows of a Ray Data batch (a dict of numpy columns) as model feeds, and the
model's outputs back as columns: the row checks that name the column and the
row id of every bad row, and the batch axis of fixed-batch models.  No Ray here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.errors import InputError
from nnrt_core.plugin_api import TensorInfo

__all__ = ["BadRow", "RowSpec", "row_specs", "check_columns", "gather_rows", "chunks", "empty_column"]


@dataclass(frozen=True)
class BadRow:
    """A row the model cannot take: its id, the column and what is wrong."""

    row_id: str
    column: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"row_id": self.row_id, "column": self.column, "error": self.error}

    def message(self) -> str:
        return f"row {self.row_id!r}, column {self.column!r}: {self.error}"


@dataclass(frozen=True)
class RowSpec:
    """One model input seen as a dataset column: the shape of one row (the
    input's shape without its batch axis; ``None`` = any size) and its dtype."""

    name: str
    column: str
    dtype: np.dtype
    row_shape: tuple[int | None, ...]
    batch: int | None  #: the model's fixed batch size, None when the batch axis is free

    def describe(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.row_shape)
        return f"rows of shape ({dims}{',' if len(self.row_shape) == 1 else ''}) {self.dtype}"

    def column_error(self, col: np.ndarray, n: int) -> str | None:
        """Why every row of the dense column ``col`` (``n`` rows expected) does not fit, or None."""
        if len(col) != n:
            return f"has {len(col)} rows where the batch has {n}"
        if col.dtype != self.dtype:
            return f"has dtype {col.dtype}, model input {self.name!r} expects {self.describe()}"
        if not _fits(col.shape[1:], self.row_shape):
            return f"has row shape {tuple(col.shape[1:])}, model input {self.name!r} expects {self.describe()}"
        return None

    def header_error(self, dtype: np.dtype, row_shape: Sequence[int]) -> str | None:
        """Why rows of ``dtype`` and ``row_shape`` (a file's header) do not fit, or None."""
        if np.dtype(dtype) != self.dtype:
            return f"has dtype {np.dtype(dtype)}, model input {self.name!r} expects {self.describe()}"
        if not _fits(tuple(row_shape), self.row_shape):
            return f"has row shape {tuple(row_shape)}, model input {self.name!r} expects {self.describe()}"
        return None

    def row_error(self, row: Any) -> str | None:
        """Why ``row`` (one row of the column) does not fit, or None."""
        if isinstance(row, np.generic):
            row = np.asarray(row)
        if not isinstance(row, np.ndarray):
            return f"holds a {type(row).__name__}, model input {self.name!r} expects {self.describe()}"
        if row.dtype != self.dtype:
            return f"has dtype {row.dtype}, model input {self.name!r} expects {self.describe()}"
        if not _fits(row.shape, self.row_shape):
            return f"has row shape {tuple(row.shape)}, model input {self.name!r} expects {self.describe()}"
        return None


def _fits(shape: Sequence[int], want: Sequence[int | None]) -> bool:
    return len(shape) == len(want) and all(w is None or s == w for s, w in zip(shape, want))


def row_specs(inputs: Sequence[TensorInfo], input_map: Mapping[str, str] | None = None) -> list[RowSpec]:
    """A :class:`RowSpec` per model input; ``input_map`` maps input names to
    column names (default: the same name)."""
    input_map = dict(input_map or {})
    names = {i.name for i in inputs}
    unknown = sorted(set(input_map) - names)
    if unknown:
        raise InputError(f"input_map names {unknown}, which are not inputs of the model; inputs: {sorted(names)}")
    specs = []
    for info in inputs:
        if info.kind != "tensor" or info.dtype is None or not info.shape:
            raise InputError(f"model input {info.name!r} ({info.kind}, shape {info.shape}) has no batch axis; "
                             "batch inference needs tensor inputs whose first axis is the batch")
        batch = info.shape[0] if isinstance(info.shape[0], int) else None
        row = tuple(d if isinstance(d, int) else None for d in info.shape[1:])
        specs.append(RowSpec(info.name, input_map.get(info.name, info.name), np.dtype(info.dtype), row, batch))
    return specs


def check_columns(specs: Sequence[RowSpec], columns: Sequence[str], keep: Sequence[str]) -> None:
    """Every model input has its column, and every column is an input or one
    of ``keep`` (row id, passthrough): else an :class:`InputError` naming them."""
    wanted = {s.column for s in specs}
    missing = [f"{s.column!r} (model input {s.name!r}, {s.describe()})" for s in specs if s.column not in columns]
    if missing:
        raise InputError(f"the dataset has no column for model input(s): {', '.join(missing)}; "
                         f"columns: {list(columns)}")
    unknown = [c for c in columns if c not in wanted and c not in keep]
    if unknown:
        raise InputError(f"dataset column(s) {unknown} are no inputs of the model (inputs: "
                         f"{[s.column for s in specs]}); rename them with input_map or keep them with passthrough")


def gather_rows(specs: Sequence[RowSpec], batch: Mapping[str, Any], ids: Sequence[str]
                ) -> tuple[dict[str, np.ndarray], list[int], list[BadRow]]:
    """The good rows of ``batch`` stacked per model input, their positions in
    the batch, and the bad rows (first problem of each row)."""
    n = len(ids)
    bad: dict[int, BadRow] = {}
    for s in specs:
        col = batch[s.column]
        if isinstance(col, np.ndarray) and col.dtype != object:
            problem = s.column_error(col, n)
            if problem:
                for i in range(n):
                    bad.setdefault(i, BadRow(str(ids[i]), s.column, problem))
            continue
        for i in range(n):  # ragged (object) column: every row checked on its own
            problem = s.row_error(col[i])
            if problem and i not in bad:
                bad[i] = BadRow(str(ids[i]), s.column, problem)
    good = [i for i in range(n) if i not in bad]
    feeds = {}
    for s in specs:
        col = batch[s.column]
        if isinstance(col, np.ndarray) and col.dtype != object:
            feeds[s.name] = col if len(good) == n else col[good]
        else:
            feeds[s.name] = np.stack([col[i] for i in good]) if good else np.empty((0,), s.dtype)
    return feeds, good, [bad[i] for i in sorted(bad)]


def chunks(n: int, batch: int | None) -> list[tuple[int, int]]:
    """``[start, stop)`` runs over ``n`` rows: one for a free batch axis, else
    runs of the model's fixed batch size (the last may be short)."""
    if n == 0:
        return []
    step = n if batch is None else max(batch, 1)
    return [(a, min(a + step, n)) for a in range(0, n, step)]


def empty_column(info: TensorInfo) -> np.ndarray:
    """An empty output column (no good rows in a batch) with the output's row shape where known."""
    row = [d if isinstance(d, int) else 0 for d in (info.shape or ())[1:]]
    return np.zeros((0, *row), dtype=info.dtype if info.dtype is not None else np.float32)
