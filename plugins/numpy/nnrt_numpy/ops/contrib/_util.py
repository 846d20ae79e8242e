"""Helpers shared by the com.microsoft kernels: activation functions named by
string attributes (FusedConv / FusedGemm), GELU variants, and scalar
quantization parameters."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from nnrt_numpy.fast_erf import gelu_float32
from nnrt_numpy.special import erf, load as load_scipy  # exact GELU needs erf; numpy has none (SciPy, imported on first use)

MS = "com.microsoft"

Activation = Callable[[np.ndarray], np.ndarray]


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(x.dtype, copy=False)


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """Exact GELU, computed in at least float32 (float32: :func:`nnrt_numpy.fast_erf.gelu_float32`,
    within 6e-7 absolute and 2e-7 x max(|x|, 1) of the exact function, like ORT's MLAS erf)."""
    if x.dtype == np.float32:
        return gelu_float32(x)
    xf = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    return (0.5 * xf * (1.0 + erf(xf / np.sqrt(2.0).astype(xf.dtype)))).astype(x.dtype, copy=False)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """tanh approximation of GELU."""
    xf = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    c = np.sqrt(2.0 / np.pi)
    return (0.5 * xf * (1.0 + np.tanh(c * (xf + 0.044715 * xf * xf * xf)))).astype(x.dtype, copy=False)


# name -> (parameter defaults, factory(params) -> activation)
_ACTS: dict[str, tuple[tuple[float, ...], Callable[..., Activation]]] = {
    "Relu": ((), lambda: lambda x: np.maximum(x, 0)),
    "Tanh": ((), lambda: np.tanh),
    "Sigmoid": ((), lambda: sigmoid),
    "LeakyRelu": ((0.01,), lambda a: lambda x: np.where(x >= 0, x, x * a)),
    "Clip": ((-np.inf, np.inf), lambda lo, hi: lambda x: np.clip(x, lo, hi)),
    "HardSigmoid": ((0.2, 0.5), lambda a, b: lambda x: np.clip(a * x + b, 0, 1)),
    "Elu": ((1.0,), lambda a: lambda x: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0)))),
    "Selu": ((1.67326319217681884765625, 1.05070102214813232421875),
             lambda a, g: lambda x: g * np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))),
    "ThresholdedRelu": ((1.0,), lambda a: lambda x: np.where(x > a, x, 0)),
    "Softplus": ((), lambda: lambda x: np.logaddexp(0, x)),
    "Softsign": ((), lambda: lambda x: x / (1 + np.abs(x))),
    "ScaledTanh": ((1.0, 1.0), lambda a, b: lambda x: a * np.tanh(b * x)),
    "ParametricSoftplus": ((1.0, 1.0), lambda a, b: lambda x: a * np.logaddexp(0, b * x)),
    "Gelu": ((), lambda: (load_scipy(), gelu_erf)[1]),  # SciPy imported at compile
}


def make_activation(name: str | None, params: list[float], fail: Callable[[str], Exception]) -> Activation | None:
    """An activation from its name and positional parameters (missing ones take defaults)."""
    if name is None or name == "":
        return None
    if isinstance(name, bytes):
        name = name.decode()
    spec = _ACTS.get(name)
    if spec is None:
        raise fail(f"unsupported fused activation {name!r}")
    defaults, factory = spec
    if len(params) > len(defaults) and defaults:
        params = params[: len(defaults)]
    vals = list(params) + list(defaults[len(params):])
    return factory(*vals[: len(defaults)])


def scalar(v: np.ndarray | None, fail: Callable[[str], Exception], name: str, default: float = 0.0) -> float:
    """A per-tensor quantization parameter as a Python float."""
    if v is None:
        return default
    a = np.asarray(v)
    if a.size != 1:
        raise fail(f"{name} must be a scalar (per-tensor), got shape {a.shape}")
    return float(a.reshape(()).astype(np.float64))


def in_place_activation(name: Any, params: list[float], dtype: np.dtype) -> Activation | None:
    """An activation applied in place (``f(y)`` modifies ``y``), or None."""
    if isinstance(name, bytes):
        name = name.decode()
    t = dtype.type
    if name == "Relu":
        zero = t(0)
        return lambda y: np.maximum(y, zero, out=y)
    if name == "LeakyRelu":
        alpha = t(params[0] if params else 0.01)
        return lambda y: np.multiply(y, alpha, out=y, where=y < 0)
    if name == "Clip":
        lo = params[0] if len(params) > 0 else -np.inf
        hi = params[1] if len(params) > 1 else np.inf
        return lambda y: np.clip(y, t(lo), t(hi), out=y)
    return None
