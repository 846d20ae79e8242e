"""Pad: modes constant/reflect/edge/wrap.  Opsets 1-10 take ``pads``/``value``
attributes (``paddings`` in opset 1), 11+ inputs, 18+ an optional ``axes``
input.  Negative pads crop."""
from __future__ import annotations

import numpy as np

from ...kernel import Kernel, NodeInfo, register
from ._util import int_list


class _PadBase(Kernel):
    op_type = "Pad"

    def _parse_mode(self, node: NodeInfo) -> None:
        self.mode = node.attr("mode", "constant")
        if self.mode not in ("constant", "reflect", "edge", "wrap"):
            raise self.fail(f"unknown mode {self.mode!r}")

    def pad(self, x: np.ndarray, pads: list[int], value, axes: list[int] | None) -> np.ndarray:
        r = x.ndim
        if axes is None:
            axes = list(range(r))
        if len(pads) != 2 * len(axes):
            raise self.fail(f"pads has {len(pads)} entries, expected {2 * len(axes)}")
        full = [[0, 0] for _ in range(r)]
        for i, a in enumerate(axes):
            if not -r <= a < r:
                raise self.fail(f"axis {a} out of range for rank {r}")
            full[a % r] = [pads[i], pads[i + len(axes)]]
        crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(full))
        x = x[crop]
        widths = [(max(b, 0), max(e, 0)) for b, e in full]
        self.check_alloc([d + b + e for d, (b, e) in zip(x.shape, widths)], x.dtype)
        if self.mode == "constant":
            v = 0 if value is None else value
            return np.pad(x, widths, mode="constant", constant_values=np.asarray(v).astype(x.dtype).item()
                          if x.dtype.kind != "O" else v)
        if any(x.shape[i] == 0 and (b or e) for i, (b, e) in enumerate(widths)):
            raise self.fail(f"mode {self.mode} cannot pad an empty axis")
        if self.mode == "reflect" and any(
            (b or e) and x.shape[i] < 2 for i, (b, e) in enumerate(widths)
        ):
            return np.pad(x, widths, mode="edge")
        return np.pad(x, widths, mode=self.mode)


@register
class Pad1(_PadBase):
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        self._parse_mode(node)
        pads = node.attr("pads", node.attr("paddings"))
        if pads is None:
            raise self.fail("attribute pads is required")
        self.pads = int_list(pads)
        self.value = float(node.attr("value", 0.0))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray]:
        return (self.pad(x, self.pads, self.value, None),)


@register
class Pad11(_PadBase):
    since_version = 11

    def _setup(self, node: NodeInfo) -> None:
        self._parse_mode(node)

    def __call__(self, x, pads, value=None, axes=None) -> tuple[np.ndarray]:
        v = None if value is None or value.size == 0 else value.reshape(-1)[0]
        return (self.pad(x, int_list(pads), v, int_list(axes)),)
