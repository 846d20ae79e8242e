"""SequenceMap: apply a sub-graph to every element of the input sequence(s)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


@register
class SequenceMap(Kernel):
    op_type = "SequenceMap"
    since_version = 17
    needs_scope = True

    def _setup(self, node: NodeInfo) -> None:
        if node.attr("body") is None:
            raise self.fail("missing required attribute 'body'")
        self.body = node.compile_subgraph(node.attr("body"))
        if len(self.body.input_names) != node.num_inputs:
            raise self.fail(f"body takes {len(self.body.input_names)} inputs, node has {node.num_inputs}")

    def __call__(self, seq: Any, *extra: Any, scope: Mapping[str, Any] | None = None) -> list[Any]:
        if not isinstance(seq, list):
            raise self.fail("first input must be a sequence")
        lengths = {len(seq)} | {len(x) for x in extra if isinstance(x, list)}
        if len(lengths) != 1:
            raise self.fail(f"input sequences have different lengths {sorted(lengths)}")
        outs: list[list[np.ndarray]] = [[] for _ in self.body.output_names]
        for i in range(len(seq)):
            args = [seq[i]] + [x[i] if isinstance(x, list) else x for x in extra]
            for k, y in enumerate(self.body(args, scope)):
                outs[k].append(y)
        return outs
