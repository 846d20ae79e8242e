"""StringSplit (opset 20): split each string by ``delimiter`` (default or empty:
runs of whitespace) at most ``maxsplit`` times; an empty string has no pieces.  Outputs the pieces padded with
empty strings to the longest split, and the number of pieces per string."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._strings import as_strings, str_attr


@register
class StringSplit(Kernel):
    op_type = "StringSplit"
    since_version = 20

    def _setup(self, node: NodeInfo) -> None:
        d = str_attr(node.attr("delimiter"), "")
        self.delimiter = d or None
        ms = node.attr("maxsplit")
        self.maxsplit = -1 if ms is None else int(ms)
        if ms is not None and self.maxsplit < 0:
            raise self.fail(f"maxsplit must be non-negative, got {self.maxsplit}")

    def __call__(self, x) -> Sequence[Any]:
        x = as_strings(x, self.fail)
        parts = [s.split(self.delimiter, self.maxsplit) if s else [] for s in x.reshape(-1).tolist()]
        counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
        width = int(counts.max()) if counts.size else 0
        out = np.full((len(parts), width), "", dtype=object)
        for i, p in enumerate(parts):  # ragged rows: one assignment per string
            out[i, : len(p)] = p
        return out.reshape(x.shape + (width,)), counts
