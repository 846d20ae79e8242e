"""Scan (opset 9+): iterate a sub-graph over slices of its scan inputs."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


@register
class Scan(Kernel):
    op_type = "Scan"
    since_version = 9
    needs_scope = True

    def _setup(self, node: NodeInfo) -> None:
        self.body = node.compile_subgraph(node.attr("body"))
        m = node.attr("num_scan_inputs")
        if m is None or m < 1 or m > node.num_inputs:
            raise self.fail(f"num_scan_inputs must be in 1..{node.num_inputs}, got {m}")
        self.m = int(m)
        self.n = node.num_inputs - self.m
        self.k = node.num_outputs - self.n
        self.in_axes = list(node.attr("scan_input_axes") or [0] * self.m)
        self.in_dirs = list(node.attr("scan_input_directions") or [0] * self.m)
        self.out_axes = list(node.attr("scan_output_axes") or [0] * self.k)
        self.out_dirs = list(node.attr("scan_output_directions") or [0] * self.k)
        for name, vals, count in (("scan_input_axes", self.in_axes, self.m),
                                  ("scan_input_directions", self.in_dirs, self.m),
                                  ("scan_output_axes", self.out_axes, self.k),
                                  ("scan_output_directions", self.out_dirs, self.k)):
            if len(vals) != count:
                raise self.fail(f"{name} has {len(vals)} entries, expected {count}")

    def __call__(self, *inputs: Any, scope: Mapping[str, Any] | None = None) -> list[Any]:
        state = list(inputs[:self.n])
        scans = []
        for x, axis, direction in zip(inputs[self.n:], self.in_axes, self.in_dirs):
            x = np.asarray(x)
            axis = axis + x.ndim if axis < 0 else axis
            x = np.moveaxis(x, axis, 0)
            scans.append(x[::-1] if direction else x)
        lengths = {s.shape[0] for s in scans}
        if len(lengths) != 1:
            raise self.fail(f"scan inputs have different lengths along their scan axes: {sorted(lengths)}")
        steps = lengths.pop()
        outs: list[list[np.ndarray]] = [[] for _ in range(self.k)]
        for t in range(steps):
            res = self.body([*state, *(s[t] for s in scans)], scope)
            state = list(res[:self.n])
            for j, y in enumerate(res[self.n:]):
                outs[j].append(np.asarray(y))
        results = []
        for items, axis, direction in zip(outs, self.out_axes, self.out_dirs):
            if direction:
                items = items[::-1]
            stacked = np.stack(items) if items else np.zeros((0,), np.float32)
            axis = axis + stacked.ndim if axis < 0 else axis
            results.append(np.moveaxis(stacked, 0, axis))
        return state + results
