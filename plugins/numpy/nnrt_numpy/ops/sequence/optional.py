"""Optional (15+): wrap an input into an optional, or make an empty optional (``None``)."""
from __future__ import annotations

from typing import Any, Sequence

from nnrt_numpy.kernel import Kernel, register


@register
class Optional(Kernel):
    op_type = "Optional"
    since_version = 15

    def __call__(self, x: Any = None) -> Sequence[Any]:
        return (x,)
