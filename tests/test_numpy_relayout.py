"""``nnrt_numpy.relayout.transposed``: the same array as ``np.ascontiguousarray(a.T)``, strip copies or not."""
from __future__ import annotations

import numpy as np
import pytest

from nnrt_numpy import relayout
from nnrt_numpy.relayout import transposed


@pytest.mark.parametrize("shape", [(1, 1), (3, 700), (17, 33), (1025, 300), (300, 1025), (16, 40000), (130, 65)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8])
@pytest.mark.parametrize("aliasing", [1, 1 << 40])  # every row length takes the narrow strips; none does
def test_transposed_equals_a_contiguous_transpose(shape, dtype, aliasing, monkeypatch):
    monkeypatch.setattr(relayout, "MIN_STRIP_BYTES", 0)  # every size takes the strips
    monkeypatch.setattr(relayout, "ALIASING_ROW_BYTES", aliasing)
    a = (np.random.default_rng(1).standard_normal(shape) * 50).astype(dtype)
    got = transposed(a)
    assert got.shape == shape[::-1] and got.dtype == a.dtype and got.flags.c_contiguous
    assert np.array_equal(got, a.T) and got.tobytes() == np.ascontiguousarray(a.T).tobytes()


@pytest.mark.parametrize("shape", [(2048, 256), (300, 1000)])  # 1 KiB rows: narrow strips; 4000-byte rows: wide
def test_transposed_of_a_large_weight_copies(shape):
    a = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)  # over MIN_STRIP_BYTES
    got = transposed(a)
    assert not np.shares_memory(got, a) and np.array_equal(got, a.T) and got.flags.c_contiguous


def test_transposed_of_a_non_contiguous_source():
    a = np.arange(4000 * 300, dtype=np.float32).reshape(4000, 300)[::2, ::3]
    assert np.array_equal(transposed(a), a.T)
