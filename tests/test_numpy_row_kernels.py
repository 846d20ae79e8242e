"""The NumPy backend's row-wise Softmax and LayerNormalization forms (``softmax_rows``,
``normalize_rows``) against ONNX Runtime and against the classic whole-array formulas, on generated
cases: the unshifted softmax, the rows that need the max shift, special values, sizes on both sides of
the fast form's threshold."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core import ScheduleConfig, Session
from nnrt_numpy.ops.nn import softmax as sm
from nnrt_numpy.ops.nn._norm import ROWS_FROM, normalize, normalize_rows


def _classic(x: np.ndarray) -> np.ndarray:
    y = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    np.exp(y, out=y)
    return y / y.sum(axis=-1, keepdims=True)


def _model(node: onnx.NodeProto, x_shape: tuple, inits: list, opset: int = 17) -> bytes:
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x_shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _both(model: bytes, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = Session(model, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"]
    return np.asarray(got), want


@pytest.mark.parametrize("shape", [(1, 12, 128, 128), (2, 6, 50, 197), (3, 7), (4, 1000)])
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_softmax_matches_ort(shape, scale) -> None:
    x = (np.random.default_rng(0).standard_normal(shape) * scale).astype(np.float32)
    got, want = _both(_model(helper.make_node("Softmax", ["x"], ["y"], axis=-1), shape, [], 13), x)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7)


def test_unshifted_form_is_taken_and_accurate() -> None:
    x = (np.random.default_rng(1).standard_normal((64, 128)) * 8).astype(np.float32)
    assert x.max() <= sm._UNSHIFTED_MAX
    got = sm.softmax(x, 1)
    np.testing.assert_allclose(got, _classic(x), rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(got.sum(axis=1), 1, rtol=1e-5)


def test_rows_that_need_the_shift() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 100)).astype(np.float32)
    x[3] -= 10_000  # a fully masked row: exp underflows to 0 without the shift
    x[7] = -np.inf  # all -inf: NaN, as the classic form
    x[11, :50] = -np.inf  # half masked with -inf: fine unshifted
    x[13] -= 60  # a row sum of ~e^-60: below the bound, shifted
    assert x.max() <= sm._UNSHIFTED_MAX  # the unshifted form, with rows fixed up
    with np.errstate(all="ignore"):
        want = _classic(x)
    got = sm.softmax(x, 1)
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-6, atol=1e-12)
    assert np.isnan(got[7]).all() and np.isfinite(np.delete(got, 7, axis=0)).all()
    np.testing.assert_allclose(got[[3, 13]].sum(axis=1), 1, rtol=1e-5)
    assert (got[11, :50] == 0).all()


def test_nan_and_inf_as_the_classic_form() -> None:
    x = np.random.default_rng(7).standard_normal((40, 100)).astype(np.float32)
    x[9, 5] = np.nan
    x[10, 3] = np.inf
    with np.errstate(all="ignore"):
        got = sm.softmax(x, 1)
        want = _classic(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[9]).all() and np.isnan(got[10]).all()
    np.testing.assert_allclose(got[:9], want[:9], rtol=2e-6, atol=1e-12)


def test_large_values_take_the_shifted_form() -> None:
    x = (np.random.default_rng(3).standard_normal((50, 64)) * 50).astype(np.float32)
    x[0, 0] = 1000.0  # exp would overflow unshifted
    got = sm.softmax(x, 1)
    np.testing.assert_allclose(got, _classic(x), rtol=2e-6, atol=1e-12)
    assert got[0, 0] == 1


@pytest.mark.parametrize("k", [1, 2])
def test_softmax_rows_in_place_and_pieces(k) -> None:
    x = np.random.default_rng(4).standard_normal((300, 40)).astype(np.float32)
    want = _classic(x)
    y = x.copy()
    sm.softmax_rows(y, y, k)  # in place: the classic form
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-9)
    out = np.empty_like(x)
    sm.softmax_rows(x, out, k)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize("shape,axis", [((1, 128, 384), -1), ((2, 197, 64), -1), ((4, 8, 16, 24), 2), ((3, 5), -1)])
def test_layer_norm_matches_ort(shape, axis) -> None:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    nshape = shape[axis % len(shape):]
    scale = rng.standard_normal(nshape).astype(np.float32)
    bias = rng.standard_normal(nshape).astype(np.float32)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=axis, epsilon=1e-5)
    model = _model(node, shape, [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    got, want = _both(model, x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_normalize_rows_against_the_general_form() -> None:
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((64, 96)) * 10 + 5).astype(np.float32)
    assert x.size >= ROWS_FROM
    y, mean, inv = normalize_rows(x, 1, 1e-6)
    y0, mean0, inv0 = normalize(x, (1,), 1e-6)
    assert mean.shape == mean0.shape == (64, 1) and inv.shape == (64, 1)
    np.testing.assert_allclose(y, y0, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(mean, mean0, rtol=1e-5)
    np.testing.assert_allclose(inv, inv0, rtol=1e-4)
    assert normalize_rows(x[:, ::2], 1, 1e-6) is None  # not contiguous: the general form
    assert normalize_rows(x.astype(np.float16), 1, 1e-6) is None
    assert normalize_rows(x, 1, 1e-6, scale=np.ones((2, 64, 96), np.float32)) is None  # would broadcast y up
