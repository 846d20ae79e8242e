"""Shared plumbing of the ai.onnx.preview.training optimizers.

Every optimizer takes ``R`` (learning rate, float scalar), ``T`` (update
count, int64 scalar) and then ``k`` groups of ``n`` tensors (for example
``X1..Xn, G1..Gn, H1..Hn`` for Adagrad); it returns ``m`` groups of ``n``
updated tensors.  The kernel validates the arity at compile time and the
per-tensor shapes and dtypes at run time, then applies ``update`` to each
optimized tensor.
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo

TRAINING = "ai.onnx.preview.training"
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class Optimizer(Kernel):
    domain = TRAINING
    since_version = 1
    #: input groups after R and T (e.g. X, G, H) and output groups (e.g. X_new, H_new)
    in_groups: ClassVar[tuple[str, ...]]
    out_groups: ClassVar[tuple[str, ...]]

    def _setup(self, node: NodeInfo) -> None:
        k = len(self.in_groups)
        rest = node.num_inputs - 2
        if rest < k or rest % k:
            raise self.fail(f"expects R, T and {k} groups of n tensors "
                            f"({', '.join(self.in_groups)}), got {node.num_inputs} inputs")
        self.n = rest // k
        want = len(self.out_groups) * self.n
        if node.num_outputs != want:
            raise self.fail(f"{self.n} optimized tensor(s) need {want} outputs "
                            f"({', '.join(self.out_groups)}), got {node.num_outputs}")
        if not all(node.present(i) for i in range(node.num_inputs)):
            raise self.fail("no input is optional")
        self._attrs(node)

    def _attrs(self, node: NodeInfo) -> None:
        """Parse the optimizer's attributes."""

    def _float_attr(self, node: NodeInfo, name: str, default: float | None) -> float:
        v = node.attr(name, default)
        if v is None:
            raise self.fail(f"missing required attribute {name!r}")
        return float(v)

    def _scalars(self, r: Any, t: Any) -> tuple[float, int]:
        r = np.asarray(r)
        t = np.asarray(t)
        if r.size != 1 or r.dtype not in _FLOATS:
            raise self.fail(f"R must be a float or double scalar, got {r.dtype} {r.shape}")
        if t.size != 1 or t.dtype != np.int64:
            raise self.fail(f"T must be an int64 scalar, got {t.dtype} {t.shape}")
        return float(r.reshape(())), int(t.reshape(()))

    def __call__(self, r: Any, t: Any, *tensors: Any) -> Sequence[Any]:
        rate, step = self._scalars(r, t)
        n = self.n
        groups = [[np.asarray(x) for x in tensors[g * n:(g + 1) * n]] for g in range(len(self.in_groups))]
        outs: list[list[np.ndarray]] = [[] for _ in self.out_groups]
        for i in range(n):
            args = [grp[i] for grp in groups]
            x = args[0]
            if x.dtype not in _FLOATS:
                raise self.fail(f"{self.in_groups[0]}{i + 1} must be float or double, got {x.dtype}")
            for name, a in zip(self.in_groups[1:], args[1:]):
                if a.shape != x.shape or a.dtype != x.dtype:
                    raise self.fail(f"{name}{i + 1} ({a.dtype} {a.shape}) must match "
                                    f"{self.in_groups[0]}{i + 1} ({x.dtype} {x.shape})")
            for j, y in enumerate(self.update(rate, step, *args)):
                outs[j].append(np.asarray(y, dtype=x.dtype))
        return [y for grp in outs for y in grp]

    def update(self, r: float, t: int, *args: np.ndarray) -> Sequence[np.ndarray]:  # pragma: no cover
        raise NotImplementedError
