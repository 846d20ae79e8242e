"""STFT (opset 17): short-time Fourier transform of ``[batch, length, 1|2]``
signals, or real ``[batch, length]`` ones (which ONNX Runtime accepts too): frames of ``frame_length`` every ``frame_step`` samples, multiplied by
``window``, transformed (one-sided by default for real input).
Output ``[batch, frames, bins, 2]``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import from_complex, scalar_int, to_complex


@register
class STFT(Kernel):
    op_type = "STFT"
    since_version = 17

    def _setup(self, node: NodeInfo) -> None:
        self.onesided = bool(node.attr("onesided", 1))

    def __call__(self, signal, frame_step, window=None, frame_length=None) -> Sequence[Any]:
        x = np.asarray(signal)
        if x.ndim == 2:  # real [batch, length]
            x = x[..., None]
        if x.ndim != 3:
            raise self.fail(f"signal must be [batch, length], [batch, length, 1] or [batch, length, 2], got shape {x.shape}")
        step = scalar_int(frame_step, self.fail, "frame_step")
        if step <= 0:
            raise self.fail(f"frame_step must be positive, got {step}")
        length = x.shape[1]
        if frame_length is not None:
            flen = scalar_int(frame_length, self.fail, "frame_length")
        elif window is not None:
            flen = np.asarray(window).shape[0]
        else:
            flen = length
        if not 0 < flen <= length:  # before the window is made: frame_length may be absurd
            raise self.fail(f"frame_length {flen} must lie in [1, {length}]")
        if window is None:
            win = np.ones(flen)
        else:
            win = np.asarray(window)
            if win.shape != (flen,):
                raise self.fail(f"window must have shape ({flen},), got {win.shape}")
        if self.onesided and x.shape[-1] != 1:
            raise self.fail("a one-sided STFT needs real input")
        c = to_complex(x, self.fail)  # (B, L)
        frames = sliding_window_view(c, flen, axis=1)[:, ::step]  # (B, T, F)
        spec = np.fft.fft(frames * win.astype(c.real.dtype), axis=-1)
        if self.onesided:
            spec = spec[..., : flen // 2 + 1]
        return (from_complex(spec, x.dtype),)
