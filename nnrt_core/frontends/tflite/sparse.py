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
    return np.array([vec.Values(j) for j in range(vec.ValuesLength())], np.int64)


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
    """Walk the storage levels depth first, writing each stored value to its dense position."""
    rank = len(shape)
    coords = [0] * len(order)
    counter = [0]

    def visit(level: int, prev: int) -> None:
        if level == len(order):
            pos = [0] * rank
            for d in range(rank):
                pos[d] = coords[d]
            for k, d in enumerate(block_map):
                pos[d] = coords[d] * block[d] + coords[rank + k]
            if any(not 0 <= p < s for p, s in zip(pos, shape)) or counter[0] >= values.size:
                raise ModelLoadError(f"{desc}: sparse element {counter[0]} at {pos} is outside shape {shape} "
                                     f"or beyond the {values.size} stored values")
            dense[np.ravel_multi_index(pos, shape)] = values[counter[0]]
            counter[0] += 1
            return
        size, segments, indices = dims[level]
        d = order[level]
        if segments is None:
            for i in range(size):
                coords[d] = i
                visit(level + 1, prev * size + i)
            return
        if prev + 1 >= segments.size or not 0 <= segments[prev] <= segments[prev + 1] <= indices.size:
            raise ModelLoadError(f"{desc}: sparse segments of dimension {d} are out of range")
        for k in range(int(segments[prev]), int(segments[prev + 1])):
            coords[d] = int(indices[k])
            visit(level + 1, k)

    visit(0, 0)
