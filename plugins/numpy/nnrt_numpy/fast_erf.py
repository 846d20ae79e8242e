"""The error function for float32 (and float16) arrays in plain NumPy.

``scipy.special.erf`` evaluates float32 input through its double-precision
routine at about 15 ns per value on this machine, which made ``Erf`` (the
exact GELU of transformer and PP-OCRv5/v6 blocks) the most expensive node of
some mobile models.  :func:`erf_float32` instead evaluates the rational
approximation ONNX Runtime (MLAS), Eigen and XLA use for float32,

    erf(x) ~= x * P(x^2) / Q(x^2),  x clamped to [-4, 4]

(P of degree 6, Q of degree 4 in x^2: Eigen's ``generic_fast_erf_float``
coefficients), as 25 whole-array float32 ufunc passes, about 6x faster
(0.23 vs 1.39 ms CPU for 92,160 values).  Its error against the exact
function is below 5e-7 absolute and relative (at most 8 float32 ulps, near
|x| = 3.2; ``tests/test_fast_erf.py`` checks it against float64
``scipy.special.erf`` on a dense grid); NaN stays NaN, +-inf give +-1.
float64 input keeps ``scipy.special.erf``.

:func:`gelu_float32` (the fused GELU tail) does not go through erf: it
evaluates Phi(x) = 0.5 + 0.5 tanh(x R(x^2)) with numpy's SIMD tanh (see
``GELU_R`` below).
"""
from __future__ import annotations

import numpy as np

from nnrt_numpy.ufuncs import clip

__all__ = ["erf_float32", "gelu_float32", "ALPHA", "BETA", "GELU_R", "GELU_CLAMP"]

#: odd numerator coefficients alpha_1 ... alpha_13 (of x, x^3, ... x^13)
ALPHA = (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04, -5.69250639462346e-05,
         -2.10102402082508e-06, 2.77068142495902e-08, -2.72614225801306e-10)
#: even denominator coefficients beta_0 ... beta_8 (of 1, x^2, ... x^8)
BETA = (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03, -2.13374055278905e-04,
        -1.45660718464996e-05)

_A = tuple(np.float32(a) for a in ALPHA)
_B = tuple(np.float32(b) for b in BETA)
_FOUR = np.float32(4.0)


def erf_float32(x: np.ndarray) -> np.ndarray:
    """erf of a float32 array, a fresh array of its shape (float16 input is
    computed in float32 and rounded back)."""
    src = np.asarray(x)
    flat = src.astype(np.float32, copy=False).reshape(-1)  # 1-D: ``out=`` works for 0-d input too
    xc = clip(flat, -_FOUR, _FOUR)  # one pass (minimum then maximum with a scalar: 4x slower), NaN stays NaN
    p = _odd_rational(xc, np.multiply(xc, xc), _A, _B)
    return p.reshape(src.shape).astype(src.dtype, copy=False)


def _odd_rational(u: np.ndarray, s: np.ndarray, num: tuple, den: tuple) -> np.ndarray:
    """``u * P(s) / Q(s)`` with ``s = u * u`` (coefficients lowest power first, Horner in ``s``),
    as a fresh array; ``u`` is overwritten (it ends up holding ``Q(s)``)."""
    p = _horner(s, num)
    np.multiply(p, u, out=p)
    return np.divide(p, _horner(s, den, out=u), out=p)  # u is not needed any more


def _horner(s: np.ndarray, coeffs: tuple, out: np.ndarray | None = None) -> np.ndarray:
    """``P(s)`` (coefficients lowest power first) by Horner's rule, into ``out`` or a fresh array."""
    p = np.multiply(s, coeffs[-1], out=out)
    for c in coeffs[-2:0:-1]:
        np.add(p, c, out=p)
        np.multiply(p, s, out=p)
    return np.add(p, coeffs[0], out=p)


# GELU(x) = x * Phi(x) with Phi(x) = 0.5 + 0.5 * tanh(g(x)), g(x) = atanh(erf(x / sqrt(2))): g is odd and
# smooth, so g(x) ~= x * R(x^2) with R of degree 6 (a weighted least-squares fit on [0, GELU_CLAMP = 5.8],
# weights sech^2(g) * max(x, 1): the sensitivity of GELU to g).  np.tanh is one SIMD pass
# (~3.5x a multiply), so this is 17 passes and a tanh (~20.5 multiply-equivalents) instead of the 27 of the
# rational erf (~1.25x faster, benchmarks/ab/bench_gelu.py); error against float64 5.6e-7
# absolute and 1.7e-7 x max(|x|, 1) (the rational: 1.3e-6 and 2.6e-7).  At +-5.8, R gives |g| > 10, whose
# float32 tanh is +-1 exactly, and |g| only grows beyond (x clamped to +-5.8 gave the same values, one pass
# more): Phi is exactly 0 or 1 there, GELU(-inf) = -inf * 0 = NaN as unfused.
GELU_R = (0.7978845238685608, 0.03633381798863411, -3.2869327696971595e-05, -5.5307649745373055e-05,
          3.977750111516798e-06, -1.3397044540397474e-07, 1.8174942661985938e-09)
_GR = tuple(np.float32(c) for c in GELU_R)
GELU_CLAMP = 5.8
_HALF = np.float32(0.5)


def _gelu_flat(x: np.ndarray, out: np.ndarray) -> None:
    """GELU of the float32 ``x`` into ``out`` (same shape; may be ``x`` itself): 17 passes and a tanh.
    No clamp: beyond +-GELU_CLAMP, x R(x^2) only grows (10.6 at 5.8, monotone; +-inf once it
    overflows), so tanh is +-1 exactly as with the clamp: the same values bit for bit, one pass less."""
    with np.errstate(over="ignore"):  # |x| > ~8e3 overflows x R(x^2) to +-inf: tanh +-1, as wanted
        s = np.multiply(x, x)
        p = _horner(s, _GR)
        np.multiply(p, x, out=p)  # g(x) ~= x * R(x^2)
    np.tanh(p, out=p)
    np.multiply(p, _HALF, out=p)
    np.add(p, _HALF, out=p)
    np.multiply(p, x, out=out)


def gelu_float32(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Exact-form GELU ``x * 0.5 * (1 + erf(x / sqrt(2)))`` of a float32 array (error below
    6e-7 absolute and 2e-7 x max(|x|, 1), see tests/test_fast_erf.py), one step of 17 whole-array
    passes and a tanh instead of the 29 passes of Div, :func:`erf_float32`, Add, Mul and Mul; into ``out``
    (float32, ``x``'s shape; may be ``x``) or a fresh array.  NaN stays NaN, GELU(-inf) is
    NaN as in the unfused form (0 * -inf)."""
    if out is x and x.dtype == np.float32 and not x.flags.c_contiguous:  # in place on a strided view
        _gelu_flat(x, x)  # (a piece of a split Conv); 1-D below: a few % faster than n-D ufunc calls
        return x
    src = np.ascontiguousarray(x, dtype=np.float32)
    dst = out if out is not None and out.flags.c_contiguous and out.dtype == np.float32 else np.empty_like(src)
    _gelu_flat(src.reshape(-1), dst.reshape(-1))
    if out is not None and dst is not out:
        np.copyto(out, dst.reshape(out.shape))
        return out
    return dst
