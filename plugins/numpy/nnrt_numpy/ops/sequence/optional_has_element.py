"""OptionalHasElement (15+; input optional from 18): whether an optional holds a value."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register


@register
class OptionalHasElement(Kernel):
    op_type = "OptionalHasElement"
    since_version = 15

    def __call__(self, x: Any = None) -> Sequence[Any]:
        return (np.array(x is not None),)
