"""The float32 erf of the NumPy backend (nnrt_numpy.fast_erf) against float64 SciPy, and the kernels using it."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from nnrt_numpy.fast_erf import erf_float32
from nnrt_numpy.kernel import NodeInfo
from nnrt_numpy.ops.math.unary import TABLE
from nnrt_numpy.ops.nn.activation import Gelu


def _grid() -> np.ndarray:
    g = np.linspace(-6, 6, 400_001, dtype=np.float32)
    tiny = np.float32(10) ** np.linspace(-30, 1, 20_000, dtype=np.float32)
    return np.concatenate([g, tiny, -tiny])


def test_error_bound_against_float64_erf() -> None:
    g = _grid()
    want = scipy.special.erf(g.astype(np.float64))
    got = erf_float32(g)
    assert got.dtype == np.float32 and got.shape == g.shape
    err = np.abs(got.astype(np.float64) - want)
    assert err.max() < 5e-7
    assert (err / np.maximum(np.abs(want), 1e-38)).max() < 5e-7  # relative too, down to 1e-30
    ulps = err / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 8


def test_special_values_and_shapes() -> None:
    got = erf_float32(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 4.0, -9.0], np.float32))
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:5], [1, -1, 0, 0])
    assert np.signbit(got[4])  # erf(-0) = -0
    assert abs(got[5] - 1) < 1e-7 and got[6] == -1
    assert erf_float32(np.float32(0.5)).shape == ()
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(erf_float32(x[:, ::2]), scipy.special.erf(x[:, ::2]), atol=5e-7)
    h = erf_float32(x.astype(np.float16))
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, scipy.special.erf(x.astype(np.float16).astype(np.float64)), atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_and_gelu_kernels(dtype) -> None:
    x = np.random.default_rng(1).standard_normal((2, 8, 7)).astype(dtype)
    want = scipy.special.erf(x.astype(np.float64))
    got = TABLE["Erf"][0](x)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, atol=5e-7 if dtype == np.float32 else 1e-15, rtol=0)
    info = NodeInfo(name="g", op_type="Gelu", opset=20, num_inputs=1, input_present=(True,), attrs={},
                    input_dtypes=(np.dtype(dtype),), input_shapes=(x.shape,), const_inputs=(None,))
    g = Gelu(info)(x)[0]
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(g, 0.5 * x64 * (1 + scipy.special.erf(x64 / np.sqrt(2))),
                               atol=1e-6 if dtype == np.float32 else 1e-14)


def test_gelu_float32_against_float64_on_a_dense_grid():
    from scipy.special import erf

    from nnrt_numpy.fast_erf import gelu_float32

    x = np.linspace(-12, 12, 2_000_001).astype(np.float32)
    x64 = x.astype(np.float64)
    exact = x64 * 0.5 * (1 + erf(x64 / np.sqrt(2)))
    err = np.abs(gelu_float32(x).astype(np.float64) - exact)
    assert err.max() < 1e-6  # the tanh form: 5.6e-7 (the rational erf form had 1.3e-6)
    assert (err / np.maximum(np.abs(x64), 1)).max() < 3e-7
    # beyond the clamp Phi is exactly 0 or 1 (float32 tanh saturates): GELU(x) = x and -0.0
    big = np.array([5.8, 6.0, 7.5, 40.0, 3e38], np.float32)
    np.testing.assert_array_equal(gelu_float32(big), big)
    assert not gelu_float32(-big).any()


def test_gelu_float32_special_values_and_out():
    from nnrt_numpy.fast_erf import gelu_float32

    x = np.array([np.nan, np.inf, -np.inf, -1e30, -100, 0, 1e30], np.float32)
    with np.errstate(invalid="ignore"):
        y = gelu_float32(x)
    assert np.isnan(y[0]) and y[1] == np.inf and np.isnan(y[2])  # -inf * 0, as the unfused form
    assert y[3] == 0 and y[4] == 0 and y[5] == 0 and y[6] == np.float32(1e30)
    # into a strided view, and in place
    a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    want = gelu_float32(a.copy())
    buf = np.zeros((4, 12), np.float32)
    gelu_float32(a, out=buf[:, ::2])
    np.testing.assert_array_equal(buf[:, ::2], want)
    assert not buf[:, 1::2].any()
    b = a.copy()
    assert gelu_float32(b, out=b) is b
    np.testing.assert_array_equal(b, want)


def test_clip_ufunc_matches_np_clip():
    """nnrt_numpy.ufuncs.clip (the ufunc without np.clip's wrapper) gives np.clip's values:
    NaN kept, hi wins where lo > hi, in place and into a strided view."""
    from nnrt_numpy.ufuncs import clip

    x = np.array([np.nan, -np.inf, -2, -0.0, 0.5, 3, np.inf], np.float32)
    for lo, hi in [(0, np.inf), (-1, 1), (2, 1), (-np.inf, 0)]:
        lo, hi = np.float32(lo), np.float32(hi)
        np.testing.assert_array_equal(clip(x, lo, hi), np.clip(x, lo, hi))
        y = np.repeat(x, 2)
        clip(y[::2], lo, hi, out=y[::2])
        np.testing.assert_array_equal(y[::2], np.clip(x, lo, hi))
        np.testing.assert_array_equal(y[1::2], x)


def test_gelu_float32_without_the_clamp_equals_the_clamped_form_bit_for_bit():
    """Beyond +-GELU_CLAMP, x R(x^2) keeps growing (tanh +-1 exactly), so leaving out the clamp
    changes no value: checked against the clamped form on every 97th float32 from 0 up to 3e38,
    both signs, with no overflow warning (RuntimeWarning is an error here)."""
    import warnings

    from nnrt_numpy.fast_erf import GELU_CLAMP, GELU_R, gelu_float32

    def clamped(x: np.ndarray) -> np.ndarray:
        u = np.clip(x, np.float32(-GELU_CLAMP), np.float32(GELU_CLAMP))
        s = u * u
        p = s * np.float32(GELU_R[-1])
        for c in GELU_R[-2:0:-1]:
            p = (p + np.float32(c)) * s
        p = (p + np.float32(GELU_R[0])) * u
        return (np.tanh(p) * np.float32(0.5) + np.float32(0.5)) * x

    bits = np.arange(0, 0x7F7FFFFF, 97, dtype=np.uint32)  # positive finite float32s, every 97th
    pos = bits.view(np.float32)
    x = np.concatenate([pos, -pos, np.float32([5.8, 5.8000002, 8.7e3, 1e4, 1.8e19, 3.4e38])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = gelu_float32(x)
    np.testing.assert_array_equal(got, clamped(x))
