"""Elementwise activations with scalar attributes (Relu lives in relu.py).

Each kernel reads its attributes once and computes in the input's dtype.
``Gelu`` (exact form) uses :func:`nnrt_numpy.fast_erf.gelu_float32` for
float32, :func:`nnrt_numpy.fast_erf.erf_float32` for float16 input and ``scipy.special.erf`` for float64.
"""
from __future__ import annotations

import numpy as np
from nnrt_numpy import special
from nnrt_numpy.fast_erf import erf_float32, gelu_float32

from ...kernel import Kernel, NodeInfo, register


class _Activation(Kernel):
    #: attribute name -> default value
    params: dict[str, float] = {}

    def _setup(self, node: NodeInfo) -> None:
        for name, default in self.params.items():
            setattr(self, name, float(node.attr(name, default)))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.asarray(self.f(x, x.dtype.type)).astype(x.dtype, copy=False),)

    def f(self, x: np.ndarray, t: type) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return special.expit(x).astype(x.dtype, copy=False)


@register
class Sigmoid(_Activation):
    op_type = "Sigmoid"
    uses_scipy = True

    def f(self, x, t):
        return _sigmoid(x)


@register
class Tanh(_Activation):
    op_type = "Tanh"

    def f(self, x, t):
        return np.tanh(x)


@register
class Softplus(_Activation):
    op_type = "Softplus"

    def f(self, x, t):
        return np.logaddexp(x, t(0))


@register
class Softsign(_Activation):
    op_type = "Softsign"

    def f(self, x, t):
        return x / (t(1) + np.abs(x))


@register
class Elu(_Activation):
    op_type = "Elu"
    params = {"alpha": 1.0}

    def f(self, x, t):
        return np.where(x > 0, x, t(self.alpha) * np.expm1(np.minimum(x, t(0))))


@register
class Celu(_Activation):
    op_type = "Celu"
    since_version = 12
    params = {"alpha": 1.0}

    def f(self, x, t):
        a = t(self.alpha)
        return np.maximum(x, t(0)) + np.minimum(t(0), a * np.expm1(x / a))


@register
class Selu(_Activation):
    op_type = "Selu"
    params = {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}

    def f(self, x, t):
        return t(self.gamma) * np.where(x > 0, x, t(self.alpha) * np.expm1(np.minimum(x, t(0))))


@register
class LeakyRelu(_Activation):
    op_type = "LeakyRelu"
    params = {"alpha": 0.01}

    def f(self, x, t):
        return np.where(x >= 0, x, x * t(self.alpha))


@register
class ThresholdedRelu(_Activation):
    op_type = "ThresholdedRelu"
    since_version = 10
    params = {"alpha": 1.0}

    def f(self, x, t):
        return np.where(x > t(self.alpha), x, t(0))


@register
class HardSigmoid(_Activation):
    op_type = "HardSigmoid"
    params = {"alpha": 0.2, "beta": 0.5}

    def f(self, x, t):
        return np.clip(x * t(self.alpha) + t(self.beta), t(0), t(1))


@register
class HardSwish(_Activation):
    op_type = "HardSwish"
    since_version = 14

    def f(self, x, t):
        return x * np.clip(x * t(1 / 6) + t(0.5), t(0), t(1))


@register
class Mish(_Activation):
    op_type = "Mish"
    since_version = 18

    def f(self, x, t):
        return x * np.tanh(np.logaddexp(x, t(0)))


@register
class Swish(_Activation):
    op_type = "Swish"
    since_version = 24
    params = {"alpha": 1.0}

    def f(self, x, t):
        return x * _sigmoid(x * t(self.alpha))


@register
class Gelu(_Activation):
    op_type = "Gelu"
    since_version = 20
    uses_scipy = True

    def _setup(self, node: NodeInfo) -> None:
        self.approximate = node.attr("approximate", "none")
        if self.approximate not in ("none", "tanh"):
            raise self.fail(f"approximate must be 'none' or 'tanh', got {self.approximate!r}")

    def f(self, x, t):
        if self.approximate == "tanh":
            inner = t(np.sqrt(2 / np.pi)) * (x + t(0.044715) * x ** 3)
            return t(0.5) * x * (t(1) + np.tanh(inner))
        if x.dtype == np.float32:  # one step of 27 passes (nnrt_numpy.fast_erf)
            return gelu_float32(x)
        z = x * t(1 / np.sqrt(2))
        e = erf_float32(z) if x.dtype in (np.float32, np.float16) else special.erf(z).astype(x.dtype, copy=False)
        return t(0.5) * x * (t(1) + e)


@register
class Shrink(_Activation):
    op_type = "Shrink"
    since_version = 9
    params = {"bias": 0.0, "lambd": 0.5}

    def f(self, x, t):
        lam, bias = self.lambd, self.bias
        return np.where(x < -lam, x + bias, np.where(x > lam, x - bias, 0)).astype(x.dtype)
