"""Densifying a sparse TFLite constant (the format of TFLite's ``FormatConverter``).

``traversal_order`` lists the dimensions (the original ones, then block
dimensions) in storage order; each has DENSE (``dense_size``) or SPARSE_CSR
(``array_segments`` / ``array_indices``) metadata.  Every index is checked
against the dense shape before it is used.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tflite

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.tflite.schema import guarded

__all__ = ["densify"]


def _int_vector(table: Any, kind: int, desc: str) -> np.ndarray:
    """The values of a SparseIndexVector union (Int32/Uint16/Uint8Vector)."""

    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}.get(kind)
    if cls is None or table is None:
        raise ModelLoadError(f"{desc}: sparse index vector of type {kind} is not supported")
    vec = cls()
    vec.Init(table.Bytes, table.Pos)
    if vec.ValuesLength() == 0:
        return np.zeros(0, np.int64)
    return np.asarray(vec.ValuesAsNumpy()).astype(np.int64)


def densify(raw: np.ndarray, sparsity: Any, shape: Sequence[int], dtype: np.dtype, desc: str) -> np.ndarray:
    """The dense array of sparse constant data ``raw`` (bytes) with ``sparsity`` parameters."""
    values = raw.view(dtype) if raw.nbytes % np.dtype(dtype).itemsize == 0 else None
    if values is None:
        raise ModelLoadError(f"{desc}: sparse data of {raw.nbytes} bytes is not a whole number of {np.dtype(dtype)}")
    with guarded(f"{desc} sparsity"):
        order = [int(sparsity.TraversalOrder(j)) for j in range(sparsity.TraversalOrderLength())]
        block_map = [int(sparsity.BlockMap(j)) for j in range(sparsity.BlockMapLength())]
        dims = []
        for j in range(sparsity.DimMetadataLength()):
            m = sparsity.DimMetadata(j)
            if m.Format() == 0:
                dims.append((int(m.DenseSize()), None, None))
            else:
                dims.append((0, _int_vector(m.ArraySegments(), m.ArraySegmentsType(), desc),
                             _int_vector(m.ArrayIndices(), m.ArrayIndicesType(), desc)))
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
    _fill(dense, values, dims, order, block_map, list(shape), block, desc)
    return dense.reshape(tuple(shape))


def _fill(dense: np.ndarray, values: np.ndarray, dims: list, order: list[int], block_map: list[int],
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
