"""Densifying sparse TFLite constants: the row-CSR fast path (``sparse._fill_rows``) gives
the general level-by-level expansion's (``sparse._fill``) result and errors, and the
metadata read from the vtables equals the ``tflite`` package's."""
from __future__ import annotations

import numpy as np
import pytest

tflite = pytest.importorskip("tflite")

from tflite_models import TFLiteWriter  # noqa: E402

from nnrt_core.errors import ModelLoadError  # noqa: E402
from nnrt_core.frontends.tflite import sparse  # noqa: E402
from nnrt_core.frontends.tflite.load import read_flat_model  # noqa: E402


def _csr(dense: np.ndarray) -> tuple[list, np.ndarray]:
    """(per-level metadata, stored values) of ``dense`` as leading DENSE levels and a SPARSE_CSR last level."""
    rows = dense.reshape(-1, dense.shape[-1])
    segments, indices, values = [0], [], []
    for r in rows:
        nz = np.flatnonzero(r)
        indices.extend(nz.tolist())
        values.extend(r[nz].tolist())
        segments.append(len(indices))
    dims = [(n, None, None) for n in dense.shape[:-1]]
    dims.append((0, np.array(segments, np.int64), np.array(indices, np.int64)))
    return dims, np.array(values, dense.dtype)


def _both(dims: list, values: np.ndarray, shape: list[int]) -> list:
    """What the fast path and the general path give: an array or the error message."""
    out = []
    order = list(range(len(shape)))
    for fill in (sparse._fill_rows, sparse._fill):
        dense = np.zeros(int(np.prod(shape)), values.dtype)
        try:
            done = fill(dense, values, dims, order, [], shape, *(([1] * len(shape),) if fill is sparse._fill else ()),
                        "tensor 0 'w'")
            assert done is not False, "the fast path refused a row-CSR layout"
            out.append(dense)
        except ModelLoadError as e:
            out.append(str(e))
    return out


@pytest.mark.parametrize("shape", [(7, 5), (3, 1, 1, 9), (2, 3, 4), (1, 6), (5, 1)])
def test_row_csr_fast_path_equals_the_general_expansion(shape):
    rng = np.random.default_rng(sum(shape))
    dense = (rng.standard_normal(shape) * (rng.random(shape) < 0.4)).astype(np.float32)
    dims, values = _csr(dense)
    fast, general = _both(dims, values, list(shape))
    assert np.array_equal(fast, general) and np.array_equal(fast.reshape(shape), dense)


def _corrupt(kind: str) -> tuple[list, np.ndarray, list[int]]:
    dense = np.arange(1, 13, dtype=np.float32).reshape(3, 4) * (np.arange(12).reshape(3, 4) % 3 != 0)
    dims, values = _csr(dense)
    seg, idx = dims[-1][1].copy(), dims[-1][2].copy()
    if kind == "short segments":
        seg = seg[:2]
    elif kind == "decreasing":
        seg[1], seg[2] = seg[2], seg[1]
    elif kind == "negative start":
        seg[0] = -1
    elif kind == "past the indices":
        seg[-1] = idx.size + 1
    elif kind == "column out of range":
        idx[3] = 4
    elif kind == "negative column":
        idx[0] = -2
    elif kind == "too few values":
        values = values[:-1]
    elif kind == "too many values":
        values = np.concatenate([values, values[:1]])
    elif kind == "duplicate column":
        idx[1] = idx[0]
    dims[-1] = (0, seg, idx)
    return dims, values, [3, 4]


@pytest.mark.parametrize("kind", ["short segments", "decreasing", "negative start", "past the indices",
                                  "column out of range", "negative column", "too few values", "too many values",
                                  "duplicate column"])
def test_row_csr_fast_path_refuses_what_the_general_expansion_refuses(kind):
    fast, general = _both(*_corrupt(kind))
    if isinstance(general, str):
        assert fast == general and "tensor 0 'w'" in fast
    else:  # a duplicate column: the later value wins in both
        assert kind == "duplicate column" and np.array_equal(fast, general)


def test_other_layouts_take_the_general_path():
    dims, values = _csr(np.eye(4, dtype=np.float32))
    assert sparse._fill_rows(np.zeros(16, np.float32), values, dims, [1, 0], [], [4, 4], "w") is False
    dense_dims = [(4, None, None), (5, None, None)]  # a dense size other than the shape's
    assert sparse._fill_rows(np.zeros(16, np.float32), values, dense_dims[:1] + dims[1:], [0, 1], [], [3, 4],
                             "w") is False
    assert sparse._fill_rows(np.zeros(16, np.float32), values, dims + dims[:1], [0, 1, 2], [1], [4, 4], "w") is False


def test_sparsity_metadata_read_from_the_vtables_equals_the_tflite_package():
    dense = np.array([[0, 1.5, 0, 2], [0, 0, 0, 0], [3, 0, 0, 4]], np.float32)
    w = TFLiteWriter()
    t = w.sparse_const("w_sparse", dense)
    flat = read_flat_model(w.build())
    info = flat.tensors(flat.subgraph(0), bulk=False)[t]
    order, block_map, dims = sparse._metadata(info.sparse, "w")
    ref = tflite.SparsityParameters()
    ref.Init(info.sparse.buf, info.sparse.pos)
    assert order == ref.TraversalOrderAsNumpy().tolist() and block_map == [] and ref.BlockMapLength() == 0
    assert len(dims) == ref.DimMetadataLength() == 2
    for j, (size, seg, idx) in enumerate(dims):
        m = ref.DimMetadata(j)
        assert (seg is None) == (m.Format() == 0) and size == m.DenseSize()
        if seg is not None:
            want = tflite.Int32Vector()
            want.Init(m.ArraySegments().Bytes, m.ArraySegments().Pos)
            assert seg.tolist() == want.ValuesAsNumpy().tolist()
            want.Init(m.ArrayIndices().Bytes, m.ArrayIndices().Pos)
            assert idx.tolist() == want.ValuesAsNumpy().tolist()
    assert np.array_equal(sparse.densify(info.data, info.sparse, info.shape, np.float32, "w"), dense)
