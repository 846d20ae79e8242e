"""SequenceAt: the tensor at ``position`` (negative counts from the back)."""
from __future__ import annotations

from typing import Any, Sequence

from nnrt_numpy.kernel import Kernel, register

from ._util import as_sequence, position


@register
class SequenceAt(Kernel):
    op_type = "SequenceAt"
    since_version = 11

    def __call__(self, seq, pos) -> Sequence[Any]:
        seq = as_sequence(seq, self.fail)
        return (seq[position(pos, len(seq), self.fail)],)
