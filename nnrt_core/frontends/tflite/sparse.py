"""Densifying a sparse TFLite constant (the format of TFLite's ``FormatConverter``).

``traversal_order`` lists the dimensions (the original ones, then block
dimensions) in storage order; each has DENSE (``dense_size``) or SPARSE_CSR
(``array_segments`` / ``array_indices``) metadata.  Every index is checked
against the dense shape before it is used.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.tflite.schema import guarded
from nnrt_core.frontends.tflite.table import DIM_METADATA, INDEX_VECTOR, SPARSITY, Table

__all__ = ["densify"]

#: SparseIndexVector union type -> element type of its ``values``
_INDEX_TYPES = {1: np.dtype("<i4"), 2: np.dtype("<u2"), 3: np.dtype("u1")}
_Dim = tuple[int, "np.ndarray | None", "np.ndarray | None"]  #: (dense size, segments, indices) of one level


def _int_vector(m: Table, type_field: int, field: int, desc: str) -> np.ndarray:
    """The values of a SparseIndexVector union (Int32/Uint16/Uint8Vector) as int64."""
    dtype, table = _INDEX_TYPES.get(m.u8(type_field)), m.table(field)
    if dtype is None or table is None:
        raise ModelLoadError(f"{desc}: sparse index vector of type {m.u8(type_field)} is not supported")
    return table.numbers(INDEX_VECTOR.values, dtype).astype(np.int64)


def _metadata(sparsity: Table, desc: str) -> tuple[list[int], list[int], list[_Dim]]:
    """(traversal order, block map, per-level metadata) of a ``SparsityParameters`` table."""
    order = list(sparsity.i32s(SPARSITY.traversal_order))
    block_map = list(sparsity.i32s(SPARSITY.block_map))
    dims: list[_Dim] = []
    for m in sparsity.tables(SPARSITY.dim_metadata):
        if m.i8(DIM_METADATA.format) == 0:  # DENSE
            dims.append((m.i32(DIM_METADATA.dense_size), None, None))
        else:
            dims.append((0, _int_vector(m, DIM_METADATA.array_segments_type, DIM_METADATA.array_segments, desc),
                         _int_vector(m, DIM_METADATA.array_indices_type, DIM_METADATA.array_indices, desc)))
    return order, block_map, dims


def densify(raw: np.ndarray, sparsity: Table, shape: Sequence[int], dtype: np.dtype, desc: str) -> np.ndarray:
    """The dense array of sparse constant data ``raw`` (bytes) with ``sparsity`` parameters
    (the tensor's ``SparsityParameters`` table)."""
    values = raw.view(dtype) if raw.nbytes % np.dtype(dtype).itemsize == 0 else None
    if values is None:
        raise ModelLoadError(f"{desc}: sparse data of {raw.nbytes} bytes is not a whole number of {np.dtype(dtype)}")
    with guarded(f"{desc} sparsity"):
        order, block_map, dims = _metadata(sparsity, desc)
    rank = len(shape)
    if len(dims) != len(order) or sorted(order) != list(range(len(order))) or len(order) != rank + len(block_map):
        raise ModelLoadError(f"{desc}: inconsistent sparsity parameters (traversal order {order}, "
                             f"block map {block_map}, {len(dims)} dimension metadata)")
    block = [1] * rank
    for k, d in enumerate(block_map):
        if not 0 <= d < rank:
            raise ModelLoadError(f"{desc}: block map {block_map} is out of range for rank {rank}")
        block[d] = dims[order.index(rank + k)][0]
    dense = np.zeros(int(np.prod(shape)), dtype)
    if not _fill_rows(dense, values, dims, order, block_map, list(shape), desc):
        _fill(dense, values, dims, order, block_map, list(shape), block, desc)
    return dense.reshape(tuple(shape))


def _fill_rows(dense: np.ndarray, values: np.ndarray, dims: list[_Dim], order: list[int], block_map: list[int],
               shape: list[int], desc: str) -> bool:
    """:func:`_fill` of the common layout (the converter's sparse weights): storage in dimension
    order, no blocks, every dimension DENSE at its full size but the last, which is SPARSE_CSR.
    The same checks, errors and result in a few passes; False (nothing done) for any other layout."""
    rows = math.prod(shape[:-1])
    if block_map or not rows or order != list(range(len(shape))) or dims[-1][1] is None \
            or any(dims[d][1] is not None or dims[d][0] != shape[d] for d in range(len(shape) - 1)):
        return False
    d = len(shape) - 1
    segments, indices = dims[-1][1], dims[-1][2]
    assert indices is not None
    if rows >= segments.size or np.any(np.diff(segments) < 0) or segments[0] < 0 or segments[-1] > indices.size:
        raise ModelLoadError(f"{desc}: sparse segments of dimension {d} are out of range")
    first, last = int(segments[0]), int(segments[rows])
    if last - first > values.size:
        raise ModelLoadError(f"{desc}: sparse dimension {d} addresses {last - first} elements, "
                             f"more than the {values.size} stored values")
    if last - first != values.size:
        raise ModelLoadError(f"{desc}: the sparsity parameters address {last - first} elements but "
                             f"{values.size} values are stored")
    cols = indices[first:last]  # monotone segments: row r's entries are first + [segments[r], segments[r + 1])
    if cols.size and (cols.min() < 0 or cols.max() >= shape[d]):
        raise ModelLoadError(f"{desc}: a sparse element lies outside shape {shape} (dimension {d})")
    row_of = np.repeat(np.arange(rows, dtype=np.int64) * shape[d], np.diff(segments[:rows + 1]))
    dense[row_of + cols] = values
    return True


def _fill(dense: np.ndarray, values: np.ndarray, dims: list[_Dim], order: list[int], block_map: list[int],
          shape: list[int], block: list[int], desc: str) -> None:
    """Expand the storage levels breadth first (vectorized; children keep their
    parents' order, so the result is the storage order) and scatter the values."""
    rank = len(shape)
    prev = np.zeros(1, np.int64)
    coords: list[np.ndarray | None] = [None] * len(order)
    for level, d in enumerate(order):
        size, segments, indices = dims[level]
        if segments is None:
            if size < 0 or prev.size * max(size, 1) > 4 * dense.size + 16:
                raise ModelLoadError(f"{desc}: dense size {size} of sparse dimension {d} does not fit the shape")
            coords = [None if c is None else np.repeat(c, size) for c in coords]
            coords[d] = np.tile(np.arange(size, dtype=np.int64), prev.size)
            prev = (prev[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
            continue
        if prev.size and (prev.max() + 1 >= segments.size or np.any(np.diff(segments) < 0)
                          or segments[0] < 0 or segments[-1] > indices.size):
            raise ModelLoadError(f"{desc}: sparse segments of dimension {d} are out of range")
        starts, counts = segments[prev], segments[prev + 1] - segments[prev]
        total = int(counts.sum())
        if total > values.size:
            raise ModelLoadError(f"{desc}: sparse dimension {d} addresses {total} elements, "
                                 f"more than the {values.size} stored values")
        k = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total, dtype=np.int64)
        coords = [None if c is None else np.repeat(c, counts) for c in coords]
        coords[d] = indices[k]
        prev = k
    if prev.size != values.size:
        raise ModelLoadError(f"{desc}: the sparsity parameters address {prev.size} elements but "
                             f"{values.size} values are stored")
    pos = [coords[d] for d in range(rank)]
    for k, d in enumerate(block_map):
        pos[d] = coords[d] * block[d] + coords[rank + k]
    for d in range(rank):
        if pos[d].size and (pos[d].min() < 0 or pos[d].max() >= shape[d]):
            raise ModelLoadError(f"{desc}: a sparse element lies outside shape {shape} (dimension {d})")
    dense[np.ravel_multi_index(pos, shape)] = values
