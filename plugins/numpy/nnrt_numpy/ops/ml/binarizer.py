"""Binarizer (ai.onnx.ml, opset 1): ``Y = 1 if X > threshold else 0`` element-wise
(NaN maps to 0), keeping the input dtype."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, dtypes, register

from ._util import ML


@register
class Binarizer(Kernel):
    op_type = "Binarizer"
    domain = ML
    since_version = 1
    input_dtypes = dtypes(np.float32, np.float64, np.int64, np.int32)

    def _setup(self, node: NodeInfo) -> None:
        self.threshold = float(node.attr("threshold", 0.0))

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        if x.dtype not in self.input_dtypes:
            raise self.fail(f"X must be float, double, int64 or int32, got {x.dtype}")
        return ((x > self.threshold).astype(x.dtype),)
