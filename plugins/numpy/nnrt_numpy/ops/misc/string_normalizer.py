"""StringNormalizer (opset 10): drop stopwords (case-sensitively or not) and
change case of a [C] or [1, C] string tensor.  An all-dropped input yields a
single empty string."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._strings import as_strings, str_attr


@register
class StringNormalizer(Kernel):
    op_type = "StringNormalizer"
    since_version = 10

    def _setup(self, node: NodeInfo) -> None:
        self.action = str_attr(node.attr("case_change_action"), "NONE")
        if self.action not in ("NONE", "LOWER", "UPPER"):
            raise self.fail(f"case_change_action must be NONE, LOWER or UPPER, got {self.action!r}")
        self.case_sensitive = bool(node.attr("is_case_sensitive", 0))
        stops = [str_attr(s) for s in (node.attr("stopwords") or [])]
        self.stops = set(stops) if self.case_sensitive else {s.lower() for s in stops}

    def __call__(self, x) -> Sequence[Any]:
        x = as_strings(x, self.fail)
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            raise self.fail(f"input must have shape [C] or [1, C], got {x.shape}")
        flat = x.reshape(-1).tolist()
        if self.stops:
            key = (lambda s: s) if self.case_sensitive else (lambda s: s.lower())
            flat = [s for s in flat if key(s) not in self.stops]
        if self.action == "LOWER":
            flat = [s.lower() for s in flat]
        elif self.action == "UPPER":
            flat = [s.upper() for s in flat]
        if not flat:
            flat = [""]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return (out.reshape((1, -1)) if x.ndim == 2 else out,)
