"""HammingWindow (opset 17): cosine-sum window of length ``size`` (periodic or symmetric)."""
from __future__ import annotations

from nnrt_numpy.kernel import register

from ._window import CosineWindow


@register
class HammingWindow(CosineWindow):
    op_type = "HammingWindow"
    coeffs = (25.0 / 46.0, 1.0 - 25.0 / 46.0)
