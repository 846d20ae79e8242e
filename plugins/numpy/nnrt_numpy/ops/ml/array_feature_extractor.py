"""ArrayFeatureExtractor (ai.onnx.ml, opset 1): select elements along the last
axis.  ``Z = X[..., Y.ravel()]`` with the last axis resized to ``Y.size``; a
1-D ``X`` gives a ``(1, Y.size)`` result (as onnxruntime does)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, dtypes, register

from ._util import ML


@register
class ArrayFeatureExtractor(Kernel):
    op_type = "ArrayFeatureExtractor"
    domain = ML
    since_version = 1
    input_dtypes = dtypes(np.float32, np.float64, np.int64, np.int32, object)

    def __call__(self, x, y) -> Sequence[Any]:
        x = np.asarray(x)
        idx = np.asarray(y)
        if idx.dtype != np.int64:
            raise self.fail(f"Y must be an int64 tensor, got {idx.dtype}")
        if x.ndim == 0:
            raise self.fail("X must have at least one dimension")
        idx = idx.ravel()
        n = x.shape[-1]
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            raise self.fail(f"index {int(bad[0])} is out of range for the last axis of size {n}")
        z = x[..., idx]
        return (z.reshape((1, idx.size)) if x.ndim == 1 else z,)
