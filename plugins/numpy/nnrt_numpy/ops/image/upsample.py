"""Upsample (opsets 7, 9; deprecated at 10): nearest / linear upsampling with
asymmetric coordinates.  Opset 7 reads ``scales`` from an attribute, 9+ from
the second input."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._resample import attr_text
from .resize import upsample_legacy


class _UpsampleBase(Kernel):
    op_type = "Upsample"

    def _setup(self, node: NodeInfo) -> None:
        self.mode = attr_text(node.attr("mode", "nearest"))
        if self.mode == "bilinear":
            self.mode = "linear"
        if self.mode not in ("nearest", "linear"):
            raise self.fail(f"mode must be nearest or linear, got {self.mode!r}")


@register
class Upsample7(_UpsampleBase):
    since_version = 7

    def _setup(self, node: NodeInfo) -> None:
        super()._setup(node)
        scales = node.attr("scales")
        if scales is None:
            raise self.fail("the 'scales' attribute is required")
        self.scales = np.asarray(scales, dtype=np.float64).ravel()

    def __call__(self, x: np.ndarray) -> Sequence[Any]:
        return (upsample_legacy(self, np.asarray(x), self.scales, self.mode, True),)


@register
class Upsample9(_UpsampleBase):
    since_version = 9

    def __call__(self, x: np.ndarray, scales: np.ndarray) -> Sequence[Any]:
        return (upsample_legacy(self, np.asarray(x), np.asarray(scales, dtype=np.float64).ravel(), self.mode, True),)
