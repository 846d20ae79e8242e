"""BlackmanWindow (opset 17): cosine-sum window of length ``size`` (periodic or symmetric)."""
from __future__ import annotations

from nnrt_numpy.kernel import register

from ._window import CosineWindow


@register
class BlackmanWindow(CosineWindow):
    op_type = "BlackmanWindow"
    coeffs = (0.42, 0.5, 0.08)
