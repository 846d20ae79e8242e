"""DynamicQuantizeLinear: quantize float32 to uint8 with a scale and zero point
computed from the data range (which always includes 0).

One float32 array: ``rint(x / scale) + zp`` and the clip (numpy's one-pass
``clip`` ufunc) in place, then the uint8 copy (a buffered ``add`` into uint8
and the two-ufunc clip measured slower)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, dtypes, register


@register
class DynamicQuantizeLinear(Kernel):
    op_type = "DynamicQuantizeLinear"
    since_version = 11
    input_dtypes = dtypes(np.float32)

    def __call__(self, x: np.ndarray) -> Sequence[Any]:
        x = np.asarray(x, dtype=np.float32)
        lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
        hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
        scale = np.float32((hi - lo) / np.float32(255))
        if scale == 0 or not np.isfinite(scale):
            zp = np.uint8(0)
            y = np.zeros(x.shape, dtype=np.uint8)
            return y, np.array(scale, dtype=np.float32), np.array(zp, dtype=np.uint8)
        zp_f = np.float32(0) - lo / scale
        zp = np.uint8(np.rint(np.clip(zp_f, 0, 255)))
        q = np.divide(x, scale, dtype=np.float32)
        np.rint(q, out=q)
        q += np.float32(zp)
        np.clip(q, np.float32(0), np.float32(255), out=q)
        y = q.astype(np.uint8)
        return y, np.array(scale, dtype=np.float32), np.array(zp, dtype=np.uint8)
