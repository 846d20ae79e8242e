"""Loop: a sub-graph run while a trip count and a condition allow, carrying
state and stacking per-iteration scan outputs."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register
from nnrt_core.errors import RunStoppedError
from nnrt_numpy.limits import stopped_within, watched_control


@register
class Loop(Kernel):
    op_type = "Loop"
    since_version = 1
    needs_scope = True

    def _setup(self, node: NodeInfo) -> None:
        if node.attr("body") is None:
            raise self.fail("missing required attribute 'body'")
        self.body = node.compile_subgraph(node.attr("body"))
        self.n_carried = node.num_inputs - 2
        n_body_out = len(self.body.output_names)
        if len(self.body.input_names) != self.n_carried + 2:
            raise self.fail(f"body takes {len(self.body.input_names)} inputs, expected "
                            f"{self.n_carried + 2} (iteration, condition, {self.n_carried} carried)")
        self.n_scan = n_body_out - 1 - self.n_carried
        if self.n_scan < 0:
            raise self.fail(f"body returns {n_body_out} outputs, fewer than 1 + {self.n_carried} carried")
        self.scan_dtypes = [d for d in node.output_dtypes[self.n_carried:]]

    def __call__(self, trip_count: Any, cond: Any, *carried: Any, scope: Mapping[str, Any] | None = None) -> list[Any]:
        max_trips = None if trip_count is None else int(np.asarray(trip_count).reshape(()))
        keep_going = True if cond is None else bool(np.asarray(cond).reshape(()))
        state = list(carried)
        scans: list[list[Any]] = [[] for _ in range(self.n_scan)]
        i = 0
        watch = watched_control()  # a deadline or cancel stops the loop between iterations
        while keep_going and (max_trips is None or i < max_trips):
            if watch is not None and watch.stopped():
                raise watch.error(f"iteration {i} of node {self.node.name!r} (Loop)")
            try:
                outs = self.body([np.array(i, dtype=np.int64), np.array(keep_going), *state], scope)
            except RunStoppedError as e:
                raise stopped_within(e, f"iteration {i} of node {self.node.name!r} (Loop)") from None
            keep_going = bool(np.asarray(outs[0]).reshape(()))
            state = list(outs[1:1 + self.n_carried])
            for k, s in enumerate(outs[1 + self.n_carried:]):
                scans[k].append(s)
            i += 1
        results = []
        for k, items in enumerate(scans):
            if items:
                if isinstance(items[0], list):  # sequence scan outputs are concatenated as lists
                    results.append([x for it in items for x in it])
                else:
                    results.append(np.stack([np.asarray(x) for x in items]))
            else:
                dt = self.scan_dtypes[k] if k < len(self.scan_dtypes) and self.scan_dtypes[k] is not None else np.float32
                results.append(np.zeros((0,), dtype=dt))
        return state + results
