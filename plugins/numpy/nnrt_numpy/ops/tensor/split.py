"""Split: ``split`` sizes as attribute (opsets 1-12; opset 1 also as 2nd input)
or input (13+); equal parts otherwise, with ``num_outputs`` (18+) allowing a
smaller last chunk."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list


class _SplitBase(Kernel):
    op_type = "Split"

    def _setup(self, node: NodeInfo) -> None:
        self.axis = int(node.attr("axis", 0))
        self.split_attr = int_list(node.attr("split"))
        self.num_outputs = node.num_outputs
        self.num_outputs_attr = node.attr("num_outputs")

    def split(self, x: np.ndarray, sizes: list[int] | None) -> list[np.ndarray]:
        r = x.ndim
        if not -r <= self.axis < r:
            raise self.fail(f"axis {self.axis} out of range for rank {r}")
        axis = self.axis % r
        n = x.shape[axis]
        k = self.num_outputs
        if sizes is None:
            if self.num_outputs_attr is not None:
                k = int(self.num_outputs_attr)
                if k != self.num_outputs:
                    raise self.fail(f"num_outputs={k} but the node has {self.num_outputs} outputs")
                chunk = -(-n // k)
                sizes = [chunk] * (k - 1) + [n - chunk * (k - 1)]
                if sizes[-1] < 0:
                    raise self.fail(f"cannot split a dimension of {n} into {k} outputs")
            else:
                if n % k:
                    raise self.fail(f"dimension {n} is not divisible into {k} equal outputs")
                sizes = [n // k] * k
        if len(sizes) != self.num_outputs:
            raise self.fail(f"split has {len(sizes)} entries but the node has {self.num_outputs} outputs")
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise self.fail(f"split sizes {sizes} do not sum to dimension {n}")
        return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


@register
class Split1(_SplitBase):
    since_version = 1

    def __call__(self, x: np.ndarray, split: np.ndarray | None = None) -> list[np.ndarray]:
        return self.split(x, int_list(split) if split is not None else self.split_attr)


@register
class Split13(_SplitBase):
    since_version = 13

    def __call__(self, x: np.ndarray, split: np.ndarray | None = None) -> list[np.ndarray]:
        return self.split(x, int_list(split) if split is not None and split.size else None)
