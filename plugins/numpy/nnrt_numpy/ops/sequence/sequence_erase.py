"""SequenceErase: a new sequence without the tensor at ``position`` (default: the last)."""
from __future__ import annotations

from typing import Any, Sequence

from nnrt_numpy.kernel import Kernel, register

from ._util import as_sequence, position


@register
class SequenceErase(Kernel):
    op_type = "SequenceErase"
    since_version = 11

    def __call__(self, seq, pos=None) -> Sequence[Any]:
        seq = as_sequence(seq, self.fail)
        if not seq:
            raise self.fail("cannot erase from an empty sequence")
        i = len(seq) - 1 if pos is None else position(pos, len(seq), self.fail)
        return (seq[:i] + seq[i + 1:],)
