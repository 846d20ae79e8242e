"""DynamicQuantizeLinear: quantize float32 to uint8 with a scale and zero point
computed from the data range (which always includes 0).

One allocation of float32 and one of uint8: ``q = rint(x / scale)`` in place,
clipped to ``[-zp, 255 - zp]`` and written as ``q + zp`` straight into the
uint8 output.  That equals the ONNX order (add ``zp``, then clip to
``[0, 255]``) exactly: every value is an integer of magnitude below 2**24
(``|x / scale| <= 255 (1 + eps)`` since ``scale = (hi - lo) / 255`` with
``lo <= x <= hi``), so the sums are exact in float32."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, dtypes, register
from nnrt_numpy.ufuncs import clip


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
        zf = np.float32(zp)
        clip(q, -zf, np.float32(255) - zf, out=q)
        y = np.add(q, zf, out=np.empty(x.shape, dtype=np.uint8), casting="unsafe")
        return y, np.array(scale, dtype=np.float32), np.array(zp, dtype=np.uint8)
