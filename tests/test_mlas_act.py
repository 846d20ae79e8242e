"""nnrt_numpy.mlas_act: ONNX Runtime's (MLAS) logistic and tanh, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from nnrt_numpy.mlas_act import logistic_float32, tanh_float32
from onnx_models import make_model, vi

ort = pytest.importorskip("onnxruntime")

GRID = np.concatenate([np.linspace(-25, 25, 400_001, dtype=np.float32),
                       np.random.default_rng(0).standard_normal(200_000).astype(np.float32) * 6,
                       np.array([0.0, -0.0, 1e-30, -1e-30, 17.482065, 17.831364, np.inf, -np.inf, np.nan],
                                np.float32)])


def _ort(op: str, x: np.ndarray) -> np.ndarray:
    m = make_model([helper.make_node(op, ["x"], ["y"])], [vi("x", shape=(x.size,))], [vi("y", shape=(x.size,))])
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("op, fn", [("Sigmoid", logistic_float32), ("Tanh", tanh_float32)])
def test_bit_equal_to_onnxruntime(op, fn):
    got, want = fn(GRID), _ort(op, GRID)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)  # NaN where ORT has NaN; 1 + 1 ulp where ORT has it (logistic)


@pytest.mark.parametrize("fn, exact, bound", [(logistic_float32, lambda x: 1 / (1 + np.exp(-x)), 2e-7),
                                              (tanh_float32, np.tanh, 4e-7)])
def test_close_to_the_exact_function(fn, exact, bound):
    x = GRID[np.isfinite(GRID)]
    assert float(np.abs(fn(x) - exact(x.astype(np.float64))).max()) < bound
