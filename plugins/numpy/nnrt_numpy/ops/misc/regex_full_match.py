"""RegexFullMatch (opset 20): whether each string fully matches ``pattern``
(compiled with Python's ``re``, which accepts the RE2 syntax in common use)."""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._strings import as_strings, str_attr


@register
class RegexFullMatch(Kernel):
    op_type = "RegexFullMatch"
    since_version = 20

    def _setup(self, node: NodeInfo) -> None:
        pattern = node.attr("pattern")
        if pattern is None:
            raise self.fail("the 'pattern' attribute is required")
        try:
            self.regex = re.compile(str_attr(pattern))
        except re.error as e:
            raise self.fail(f"invalid regular expression: {e}") from None
        self._match = np.frompyfunc(lambda s: self.regex.fullmatch(s) is not None, 1, 1)

    def __call__(self, x) -> Sequence[Any]:
        x = as_strings(x, self.fail, "X")
        return (np.asarray(self._match(x), dtype=bool).reshape(x.shape),)
