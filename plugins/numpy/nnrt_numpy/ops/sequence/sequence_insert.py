"""SequenceInsert: a new sequence with ``tensor`` inserted at ``position``
(default: appended)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._util import as_sequence, position


@register
class SequenceInsert(Kernel):
    op_type = "SequenceInsert"
    since_version = 11

    def __call__(self, seq, tensor, pos=None) -> Sequence[Any]:
        seq = as_sequence(seq, self.fail)
        tensor = np.asarray(tensor)
        if seq and np.asarray(seq[0]).dtype != tensor.dtype:
            raise self.fail(f"tensor type {tensor.dtype} differs from the sequence type {np.asarray(seq[0]).dtype}")
        i = len(seq) if pos is None else position(pos, len(seq), self.fail, inclusive_end=True)
        return (seq[:i] + [tensor] + seq[i:],)
