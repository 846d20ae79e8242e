"""MelWeightMatrix (opset 17): triangular mel filter bank of shape
``[dft_length // 2 + 1, num_mel_bins]`` mapping a linear spectrogram to mel bins
(bin edges placed on the integer spectrogram grid as in the ONNX definition)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ..quant._common import dtype_from_attr
from ._util import scalar_float, scalar_int


@register
class MelWeightMatrix(Kernel):
    op_type = "MelWeightMatrix"
    since_version = 17

    def _setup(self, node: NodeInfo) -> None:
        self.out_dtype = dtype_from_attr(int(node.attr("output_datatype", 1)))

    def __call__(self, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz) -> Sequence[Any]:
        m = scalar_int(num_mel_bins, self.fail, "num_mel_bins")
        n = scalar_int(dft_length, self.fail, "dft_length")
        sr = scalar_int(sample_rate, self.fail, "sample_rate")
        lo = scalar_float(lower_edge_hertz, self.fail, "lower_edge_hertz")
        hi = scalar_float(upper_edge_hertz, self.fail, "upper_edge_hertz")
        if m <= 0 or n <= 0 or sr <= 0:
            raise self.fail("num_mel_bins, dft_length and sample_rate must be positive")
        if not 0 <= lo < hi:
            raise self.fail(f"need 0 <= lower_edge_hertz < upper_edge_hertz, got {lo}, {hi}")
        bins = n // 2 + 1
        self.check_alloc([bins, m], np.float64)  # computed in float64
        mel_lo = 2595 * np.log10(1 + lo / 700)
        mel_hi = 2595 * np.log10(1 + hi / 700)
        mel = np.arange(m + 2) * ((mel_hi - mel_lo) / (m + 2)) + mel_lo
        hz = 700 * (10 ** (mel / 2595) - 1)
        edges = ((n + 1) * hz // sr).astype(np.int64)  # (m + 2,)
        if edges.max() >= bins:
            raise self.fail("upper_edge_hertz maps beyond the spectrogram bins")
        left, center, right = edges[:-2], edges[1:-1], edges[2:]
        j = np.arange(bins)[:, None]
        rise = np.where(center > left, (j - left) / np.maximum(center - left, 1), 0.0)
        fall = np.where(right > center, (right - j) / np.maximum(right - center, 1), 0.0)
        up = (j >= left) & (j <= center) & (center > left)
        down = (j >= center) & (j < right)
        w = np.where(down, fall, np.where(up, rise, 0.0))
        w = np.where((center == left) & (j == center), np.where(down, fall, 1.0), w)
        return (w.astype(self.out_dtype),)
