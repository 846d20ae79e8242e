"""SequenceLength: number of tensors in a sequence, as an int64 scalar."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, register

from ._util import as_sequence


@register
class SequenceLength(Kernel):
    op_type = "SequenceLength"
    since_version = 11

    def __call__(self, seq) -> Sequence[Any]:
        return (np.array(len(as_sequence(seq, self.fail)), dtype=np.int64),)
