"""DFT (opsets 17, 20): (inverse) discrete Fourier transform along one axis of a
``[..., 1|2]`` real/complex tensor, with zero-padding/truncation to
``dft_length`` and one-sided spectra (RFFT forward, IRFFT inverse).
Opset 17 takes ``axis`` as an attribute (default 1), 20 as an input (default -2)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import from_complex, scalar_int, to_complex


class _DFTBase(Kernel):
    op_type = "DFT"

    def _setup(self, node: NodeInfo) -> None:
        self.inverse = bool(node.attr("inverse", 0))
        self.onesided = bool(node.attr("onesided", 0))

    def _dft(self, x: np.ndarray, dft_length: Any, axis: int) -> np.ndarray:
        x = np.asarray(x)
        r = x.ndim
        if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
            raise self.fail(f"axis {axis} out of range for rank {r} (the last axis holds real/imag)")
        axis = axis % r
        if self.onesided and not self.inverse and x.shape[-1] != 1:
            raise self.fail("a one-sided forward DFT needs real input")
        if self.onesided and self.inverse and x.shape[-1] != 2:
            raise self.fail("a one-sided inverse DFT needs complex input")
        if dft_length is None:
            n = 2 * (x.shape[axis] - 1) if self.inverse and self.onesided else x.shape[axis]
        else:
            n = scalar_int(dft_length, self.fail, "dft_length")
        if n <= 0:
            raise self.fail(f"dft_length must be positive, got {n}")
        spectrum = list(x.shape[:-1])
        spectrum[axis] = n
        self.check_alloc(spectrum, np.complex128, "spectrum")  # numpy's FFT works in complex128
        c = to_complex(x, self.fail)
        if self.inverse and self.onesided:
            return np.fft.irfft(c, n=n, axis=axis)[..., None].astype(x.dtype)
        y = np.fft.ifft(c, n=n, axis=axis) if self.inverse else np.fft.fft(c, n=n, axis=axis)
        if self.onesided:
            y = np.take(y, np.arange(n // 2 + 1), axis=axis)
        return from_complex(y, x.dtype)


@register
class DFT17(_DFTBase):
    since_version = 17

    def _setup(self, node: NodeInfo) -> None:
        super()._setup(node)
        self.axis = int(node.attr("axis", 1))

    def __call__(self, x, dft_length=None) -> Sequence[Any]:
        return (self._dft(x, dft_length, self.axis),)


@register
class DFT20(_DFTBase):
    since_version = 20

    def __call__(self, x, dft_length=None, axis=None) -> Sequence[Any]:
        ax = -2 if axis is None else scalar_int(axis, self.fail, "axis")
        return (self._dft(x, dft_length, ax),)
