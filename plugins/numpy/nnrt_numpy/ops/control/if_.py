"""If: run one of two sub-graphs chosen by a boolean scalar."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


@register
class If(Kernel):
    op_type = "If"
    since_version = 1
    needs_scope = True

    def _setup(self, node: NodeInfo) -> None:
        if node.compile_subgraph is None:
            raise self.fail("sub-graphs need a compiling executor")
        for attr in ("then_branch", "else_branch"):
            if node.attr(attr) is None:
                raise self.fail(f"missing required attribute {attr!r}")
        self.then_branch = node.compile_subgraph(node.attr("then_branch"))
        self.else_branch = node.compile_subgraph(node.attr("else_branch"))
        for branch in (self.then_branch, self.else_branch):
            if len(branch.output_names) != node.num_outputs:
                raise self.fail(f"branch has {len(branch.output_names)} outputs, node has {node.num_outputs}")

    def __call__(self, cond: Any, scope: Mapping[str, Any] | None = None) -> list[Any]:
        c = np.asarray(cond)
        if c.size != 1:
            raise self.fail(f"condition must hold exactly one element, got shape {c.shape}")
        branch = self.then_branch if bool(c.reshape(())) else self.else_branch
        return branch([], scope)
