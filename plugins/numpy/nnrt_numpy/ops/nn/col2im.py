"""Col2Im (opset 18): rearrange column blocks ``(N, C*prod(block), L)`` back into
an image, summing overlaps (scatter-add per block tap)."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._spatial import col2im_add
from ..tensor._util import int_list


@register
class Col2Im(Kernel):
    op_type = "Col2Im"
    since_version = 18

    def _setup(self, node: NodeInfo) -> None:
        self.dilations = node.attr("dilations")
        self.pads = node.attr("pads")
        self.strides = node.attr("strides")

    def __call__(self, x: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype.kind in "OUSV":  # overlapping blocks are summed: no sum of strings (the schema allows them)
            raise self.fail(f"input of dtype {x.dtype} cannot be summed; Col2Im needs a numeric tensor")
        image = int_list(image_shape)
        block = int_list(block_shape)
        nd = len(image)
        d = list(self.dilations or [1] * nd)
        s = list(self.strides or [1] * nd)
        p = list(self.pads or [0] * (2 * nd))
        if len(block) != nd or len(d) != nd or len(s) != nd or len(p) != 2 * nd:
            raise self.fail(f"image_shape has {nd} axes but block_shape has {len(block)}, dilations {len(d)}, "
                            f"strides {len(s)} and pads {len(p)} values; expected {nd} each ({2 * nd} pads)")
        if min(d + s) < 1 or min(p) < 0:
            raise self.fail(f"dilations {d} and strides {s} must be >= 1 and pads {p} >= 0")
        n, ck, l = x.shape
        k = int(np.prod(block))
        if ck % k:
            raise self.fail(f"dimension 1 ({ck}) is not a multiple of prod(block_shape) = {k}")
        blocks = [(image[i] + p[i] + p[i + nd] - ((block[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nd)]
        if int(np.prod(blocks)) != l:
            raise self.fail(f"number of blocks {l} does not match the image geometry ({blocks})")
        c = ck // k
        cols = x.reshape((n, c) + tuple(block) + tuple(blocks))
        padded = (n, c) + tuple(image[i] + p[i] + p[i + nd] for i in range(nd))
        self.check_alloc(padded, x.dtype, "padded image")
        buf = np.zeros(padded, dtype=x.dtype)
        col2im_add(cols, buf, block, s, d, blocks)
        crop = (slice(None), slice(None)) + tuple(slice(p[i], p[i] + image[i]) for i in range(nd))
        return (np.ascontiguousarray(buf[crop]),)
