"""Accuracy check: a heterogeneous session against the reference backend,
partition by partition.

The model runs once as configured (capturing every partition's boundary
outputs) and once on the reference backend alone (``numpy`` by default) on
the same feeds, with those boundary tensors exposed as extra graph outputs.
For each partition the report gives the max absolute and max relative
difference of its outputs (relative = max |a - r| / max |r|).  Differences
accumulate downstream, so the first partition where they jump is the one (and
the backend) that introduced a precision problem.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError
from nnrt_core.ir.clone import clone_graph
from nnrt_core.registry import Registry
from nnrt_core.runtime.feeds import random_feeds as synthetic_feeds

__all__ = ["TensorDiff", "PartitionAccuracy", "AccuracyReport", "check_accuracy", "compare_tensors", "random_feeds"]


@dataclass
class TensorDiff:
    """How far one tensor is from the reference."""

    name: str
    shape: tuple[int, ...] | None
    max_abs: float
    max_rel: float
    note: str = ""  #: e.g. "shape mismatch", "not a tensor"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape) if self.shape is not None else None,
                "max_abs": self.max_abs, "max_rel": self.max_rel, "note": self.note}


@dataclass
class PartitionAccuracy:
    """The outputs of one partition compared with the reference."""

    index: int
    backend: str
    node_count: int
    outputs: list[TensorDiff] = field(default_factory=list)

    @property
    def max_abs(self) -> float:
        return max((d.max_abs for d in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((d.max_rel for d in self.outputs), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "backend": self.backend, "node_count": self.node_count,
                "max_abs": self.max_abs, "max_rel": self.max_rel, "outputs": [d.to_dict() for d in self.outputs]}


@dataclass
class AccuracyReport:
    """Per-partition differences plus the final outputs'."""

    reference: str
    backends: list[str]
    partitions: list[PartitionAccuracy]
    outputs: list[TensorDiff]

    @property
    def max_abs(self) -> float:
        return max([p.max_abs for p in self.partitions] + [d.max_abs for d in self.outputs], default=0.0)

    @property
    def max_rel(self) -> float:
        return max([p.max_rel for p in self.partitions] + [d.max_rel for d in self.outputs], default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "backends": self.backends, "max_abs": self.max_abs,
                "max_rel": self.max_rel, "partitions": [p.to_dict() for p in self.partitions],
                "outputs": [d.to_dict() for d in self.outputs]}

    def format(self) -> str:
        """A text table (what ``nnrt check`` prints)."""
        lines = [f"reference: {self.reference} alone; checked: {', '.join(self.backends)}",
                 f"{'#':>3}  {'backend':<12}{'nodes':>6}  {'max abs':>10}  {'max rel':>10}  worst output"]
        for p in self.partitions:
            worst = max(p.outputs, key=lambda d: d.max_rel, default=None)
            what = "-" if worst is None else f"{worst.name}{' (' + worst.note + ')' if worst.note else ''}"
            lines.append(f"{p.index:>3}  {p.backend:<12}{p.node_count:>6}  {p.max_abs:>10.3g}  {p.max_rel:>10.3g}  "
                         f"{what}")
        for d in self.outputs:
            lines.append(f"output {d.name}: max abs {d.max_abs:.3g}, max rel {d.max_rel:.3g}"
                         + (f" ({d.note})" if d.note else ""))
        return "\n".join(lines)


def compare_tensors(name: str, got: Any, ref: Any) -> TensorDiff:
    """Max absolute and relative (to the reference's largest magnitude) difference."""
    if not isinstance(got, np.ndarray) or not isinstance(ref, np.ndarray):
        same = type(got) is type(ref)
        return TensorDiff(name, None, 0.0 if same else math.inf, 0.0 if same else math.inf, "not a tensor")
    if got.shape != ref.shape:
        return TensorDiff(name, tuple(got.shape), math.inf, math.inf,
                          f"shape mismatch: {got.shape} vs reference {ref.shape}")
    if got.size == 0:
        return TensorDiff(name, tuple(got.shape), 0.0, 0.0)
    if got.dtype.kind not in "fiub" or ref.dtype.kind not in "fiub":
        equal = bool(np.array_equal(got, ref))
        return TensorDiff(name, tuple(got.shape), 0.0 if equal else math.inf, 0.0 if equal else math.inf,
                          "compared for equality")
    a, r = got.astype(np.float64), ref.astype(np.float64)
    nan_a, nan_r = np.isnan(a), np.isnan(r)
    if not np.array_equal(nan_a, nan_r):
        return TensorDiff(name, tuple(got.shape), math.inf, math.inf, "NaN where the reference has none")
    diff = np.abs(np.where(nan_a, 0.0, a) - np.where(nan_r, 0.0, r))
    max_abs = float(np.max(diff))
    scale = float(np.max(np.abs(np.where(nan_r, 0.0, r))))
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    return TensorDiff(name, tuple(got.shape), max_abs, max_rel)


def random_feeds(session: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for ``session``: uniform [0, 1) floats, small non-negative integers,
    symbolic dims as 1."""
    return synthetic_feeds(session.inputs, seed, floats="uniform", int_high=3)


class _Capture:
    """StepObserver keeping a host copy of every partition output."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def run_step(self, index: int, step: Any, args: dict[str, Any]) -> Mapping[str, Any]:
        outs = step.compiled.run(args)
        for name in step.outputs:
            x = outs[name]
            self.values[name] = x if step.backend.host_memory else step.backend.to_host(x)
        return outs

    def transfer(self, value: str, direction: str, backend: Any, start: float, end: float, tensor: Any) -> None:
        pass


def check_accuracy(model: Any, config: ScheduleConfig | None = None, *, feeds: Mapping[str, Any] | None = None,
                   reference: str = "numpy", seed: int = 0, registry: Registry | None = None) -> AccuracyReport:
    """Run ``model`` as ``config`` places it and on ``reference`` alone; compare
    every partition's boundary outputs (see the module docstring)."""
    from nnrt_core.session import Session

    sess = Session(model, config, registry=registry)
    if not sess.graph.nodes:
        raise ConfigError("the accuracy check needs the source model; this session was loaded from a compiled "
                          "file or the model cache (pass the .onnx model, or a config without cache_dir)")
    reg = sess.registry
    reg.backend(reference)  # ConfigError listing the installed backends
    feeds = dict(feeds) if feeds is not None else random_feeds(sess, seed)
    capture = _Capture()
    got_outputs = sess.run_observed(feeds, capture)

    ref_graph = clone_graph(sess.graph)
    values = ref_graph.value_map()
    present = {v.name for v in ref_graph.outputs}
    boundary = [n for p in sess.partitions for n in p.outputs]
    for name in dict.fromkeys(boundary):
        if name not in present and name in values:
            ref_graph.outputs.append(values[name])
    ref_cfg = ScheduleConfig(backends=[reference], backup=None, optimization_level="none")
    ref_sess = Session(ref_graph, ref_cfg, registry=reg)
    ref = ref_sess.run(feeds)

    parts = []
    for p in sess.partitions:
        acc = PartitionAccuracy(p.index, p.backend, len(p.nodes))
        for name in p.outputs:
            if name in capture.values and name in ref:
                acc.outputs.append(compare_tensors(name, capture.values[name], ref[name]))
        parts.append(acc)
    outputs = [compare_tensors(name, np.asarray(got_outputs[name]) if not isinstance(got_outputs[name], list)
                               else got_outputs[name], ref[name])
               for name in got_outputs if name in ref]
    backends = list(dict.fromkeys(p.backend for p in sess.partitions))
    return AccuracyReport(reference, backends, parts, outputs)
