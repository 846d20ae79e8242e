"""HannWindow (opset 17): cosine-sum window of length ``size`` (periodic or symmetric)."""
from __future__ import annotations

from nnrt_numpy.kernel import register

from ._window import CosineWindow


@register
class HannWindow(CosineWindow):
    op_type = "HannWindow"
    coeffs = (0.5, 0.5)
