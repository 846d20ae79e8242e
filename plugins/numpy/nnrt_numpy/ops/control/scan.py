"""Scan: iterate a sub-graph over slices of its scan inputs.

* opset 8: every input has a batch axis 0 and the scan inputs a sequence axis
  1; an optional ``sequence_lens`` ([batch] int64) limits the iterations of
  each batch entry, whose scan outputs are zero-padded to the longest
  sequence; ``directions`` reverses (the valid part of) a scan input.
* opset 9+: no batch axis; ``scan_input_axes`` / ``scan_output_axes`` and
  directions for inputs and outputs."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register
from nnrt_core.errors import RunStoppedError
from nnrt_numpy.limits import check_stop, stopped_within, watched_control


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
            axis = self._axis("scan_input_axes", axis, x.ndim)
            x = np.moveaxis(x, axis, 0)
            scans.append(x[::-1] if direction else x)
        lengths = {s.shape[0] for s in scans}
        if len(lengths) != 1:
            raise self.fail(f"scan inputs have different lengths along their scan axes: {sorted(lengths)}")
        steps = lengths.pop()
        outs: list[list[np.ndarray]] = [[] for _ in range(self.k)]
        watch = watched_control()  # a deadline or cancel stops the scan between iterations
        for t in range(steps):
            check_stop(watch, f"iteration {t} of node {self.node.name!r} (Scan)")
            try:
                res = self.body([*state, *(s[t] for s in scans)], scope)
            except RunStoppedError as e:
                raise stopped_within(e, f"iteration {t} of node {self.node.name!r} (Scan)") from None
            state = list(res[:self.n])
            for j, y in enumerate(res[self.n:]):
                outs[j].append(np.asarray(y))
        results = []
        for items, axis, direction in zip(outs, self.out_axes, self.out_dirs):
            if direction:
                items = items[::-1]
            stacked = np.stack(items) if items else np.zeros((0,), np.float32)
            axis = self._axis("scan_output_axes", axis, stacked.ndim)
            results.append(np.moveaxis(stacked, 0, axis))
        return state + results

    def _axis(self, name: str, axis: int, ndim: int) -> int:
        """``axis`` of a rank-``ndim`` tensor, made non-negative; an OpError naming ``name`` when out of range."""
        if not -ndim <= axis < ndim:
            raise self.fail(f"{name} holds {axis}, out of range for a tensor of rank {ndim}")
        return axis + ndim if axis < 0 else axis


@register
class Scan8(Kernel):
    op_type = "Scan"
    since_version = 8
    needs_scope = True

    def _setup(self, node: NodeInfo) -> None:
        if node.attr("body") is None:
            raise self.fail("missing required attribute 'body'")
        self.body = node.compile_subgraph(node.attr("body"))
        m = node.attr("num_scan_inputs")
        variadic = node.num_inputs - 1
        if m is None or m < 1 or m > variadic:
            raise self.fail(f"num_scan_inputs must be in 1..{variadic}, got {m}")
        self.m = int(m)
        self.n = variadic - self.m
        self.k = node.num_outputs - self.n
        if self.k < 0:
            raise self.fail(f"node has {node.num_outputs} outputs, fewer than its {self.n} state variables")
        if len(self.body.input_names) != self.n + self.m:
            raise self.fail(f"body takes {len(self.body.input_names)} inputs, expected {self.n + self.m} "
                            f"({self.n} states + {self.m} scan inputs)")
        if len(self.body.output_names) != node.num_outputs:
            raise self.fail(f"body returns {len(self.body.output_names)} outputs, node has {node.num_outputs}")
        self.dirs = list(node.attr("directions") or [0] * self.m)
        if len(self.dirs) != self.m or any(d not in (0, 1) for d in self.dirs):
            raise self.fail(f"directions must hold {self.m} flags of 0 or 1, got {self.dirs}")
        self.out_dtypes = list(node.output_dtypes[self.n:])

    def __call__(self, seq_lens: Any, *inputs: Any, scope: Mapping[str, Any] | None = None) -> list[Any]:
        states = [np.asarray(x) for x in inputs[:self.n]]
        scans = [np.asarray(x) for x in inputs[self.n:]]
        for i, x in enumerate(scans):
            if x.ndim < 2:
                raise self.fail(f"scan input {i} must have a batch axis 0 and a sequence axis 1, got shape {x.shape}")
        batch, max_len = scans[0].shape[:2]
        for i, x in enumerate(scans[1:], 1):
            if x.shape[:2] != (batch, max_len):
                raise self.fail(f"scan input {i} has [batch, sequence] {list(x.shape[:2])}, "
                                f"scan input 0 has {[batch, max_len]}: they must agree")
        for i, s in enumerate(states):
            if s.ndim < 1 or s.shape[0] != batch:
                raise self.fail(f"initial state {i} (shape {s.shape}) must have batch size {batch} on axis 0")
        if seq_lens is None:
            lens = np.full(batch, max_len, np.int64)
        else:
            lens = np.asarray(seq_lens)
            if lens.dtype != np.int64 or lens.shape != (batch,):
                raise self.fail(f"sequence_lens must be an int64 tensor of shape [{batch}], got {lens.dtype} {lens.shape}")
            if np.any((lens < 0) | (lens > max_len)):
                raise self.fail(f"sequence_lens values must be in 0..{max_len}, got {lens.tolist()}")
        final: list[list[np.ndarray]] = [[] for _ in range(self.n)]
        outs: list[list[np.ndarray | None]] = [[] for _ in range(self.k)]
        for b in range(batch):
            n_b = int(lens[b])
            seqs = [x[b, :n_b][::-1] if d else x[b, :n_b] for x, d in zip(scans, self.dirs)]
            st = [s[b] for s in states]
            per: list[list[np.ndarray]] = [[] for _ in range(self.k)]
            for t in range(n_b):
                res = self.body([*st, *(s[t] for s in seqs)], scope)
                st = [np.asarray(r) for r in res[:self.n]]
                for j, y in enumerate(res[self.n:]):
                    per[j].append(np.asarray(y))
            for i, s in enumerate(st):
                final[i].append(s)
            for j, items in enumerate(per):
                outs[j].append(np.stack(items) if items else None)
        results = [np.stack(f) if f else s for f, s in zip(final, states)]
        for j, per_batch in enumerate(outs):
            results.append(self._pad_stack(j, per_batch, batch, max_len))
        return results

    def _pad_stack(self, j: int, per_batch: list, batch: int, max_len: int) -> np.ndarray:
        """Stack per-batch [len, ...] outputs into [batch, max_len, ...], zero-padded."""
        known = [y for y in per_batch if y is not None]
        if not known:
            dt = self.out_dtypes[j] if j < len(self.out_dtypes) and self.out_dtypes[j] is not None else np.float32
            return np.zeros((batch, max_len), dtype=dt)
        elem, dt = known[0].shape[1:], known[0].dtype
        out = np.zeros((batch, max_len, *elem), dtype=dt)
        for b, y in enumerate(per_batch):
            if y is None:
                continue
            if y.shape[1:] != elem:
                raise self.fail(f"scan output {j} changes shape across iterations ({elem} vs {y.shape[1:]})")
            out[b, :y.shape[0]] = y
        return out
