"""SequenceEmpty: an empty sequence (the ``dtype`` attribute only types it)."""
from __future__ import annotations

from typing import Any, Sequence

from nnrt_numpy.kernel import Kernel, register


@register
class SequenceEmpty(Kernel):
    op_type = "SequenceEmpty"
    since_version = 11

    def __call__(self) -> Sequence[Any]:
        return ([],)
