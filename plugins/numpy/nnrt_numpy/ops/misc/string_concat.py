"""StringConcat (opset 20): element-wise concatenation of two string tensors with broadcasting."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._strings import as_strings

_concat = np.frompyfunc(lambda a, b: a + b, 2, 1)


@register
class StringConcat(Kernel):
    op_type = "StringConcat"
    since_version = 20

    def __call__(self, x, y) -> Sequence[Any]:
        a = as_strings(x, self.fail, "X")
        b = as_strings(y, self.fail, "Y")
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise self.fail(f"shapes {a.shape} and {b.shape} do not broadcast") from None
        return (np.asarray(_concat(a, b), dtype=object),)
