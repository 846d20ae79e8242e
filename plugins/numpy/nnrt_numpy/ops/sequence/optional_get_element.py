"""OptionalGetElement (15+; plain tensors/sequences accepted from 18): the value of an optional."""
from __future__ import annotations

from typing import Any, Sequence

from nnrt_numpy.kernel import Kernel, register


@register
class OptionalGetElement(Kernel):
    op_type = "OptionalGetElement"
    since_version = 15

    def __call__(self, x: Any = None) -> Sequence[Any]:
        if x is None:
            raise self.fail("the optional input is empty")
        return (x,)
