"""Lifetime-based static memory planning (after nncase / TFLite arena planners).

Every intermediate tensor lives from the step that writes it to the last step
that reads it.  :func:`plan_offsets` packs such buffers into one arena so that
buffers whose lifetimes overlap never share bytes and the others reuse memory
(greedy by size, best-fitting gap first).  :func:`plan_graph` does it for a
graph in execution order and reports three numbers:

* ``naive_bytes`` — every intermediate in its own allocation;
* ``lower_bound_bytes`` — the most bytes live at any one step (no plan can do
  better);
* ``planned_peak_bytes`` — the arena size of the plan.
"""
from __future__ import annotations

import bisect
import functools
import math
from typing import Hashable, Sequence

import numpy as np

from nnrt_core.ir import DataType, Graph, TensorType, Value
from nnrt_core.record import Record

__all__ = ["ALIGN", "align", "Buffer", "MemoryPlan", "plan_offsets", "plan_graph", "lower_bound", "live_peak_bytes"]

ALIGN = 64


def align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


class Buffer(Record):
    """A buffer to place: bytes and live range ``[first, last]`` in step indices."""

    __slots__ = ("key", "size", "first", "last", "offset")
    key: Hashable
    size: int
    first: int
    last: int
    offset: int

    def __init__(self, key: Hashable, size: int, first: int, last: int, offset: int = -1) -> None:
        self.key, self.size, self.first, self.last, self.offset = key, size, first, last, offset


class MemoryPlan(Record):
    """Offsets of every planned buffer plus the figures for reports."""

    __slots__ = ("buffers", "planned_peak_bytes", "naive_bytes", "lower_bound_bytes", "unplanned")
    buffers: list[Buffer]
    planned_peak_bytes: int
    naive_bytes: int
    lower_bound_bytes: int
    unplanned: list[str]  #: values of unknown size

    def __init__(self, buffers: list[Buffer], planned_peak_bytes: int, naive_bytes: int, lower_bound_bytes: int,
                 unplanned: list[str] | None = None) -> None:
        self.buffers, self.planned_peak_bytes, self.naive_bytes = buffers, planned_peak_bytes, naive_bytes
        self.lower_bound_bytes, self.unplanned = lower_bound_bytes, [] if unplanned is None else unplanned

    def offsets(self) -> dict[Hashable, int]:
        return {b.key: b.offset for b in self.buffers}

    def as_stats(self) -> dict[str, int]:
        return {"planned_peak_bytes": self.planned_peak_bytes, "naive_bytes": self.naive_bytes,
                "lower_bound_bytes": self.lower_bound_bytes, "unplanned_values": len(self.unplanned)}


def plan_offsets(buffers: list[Buffer]) -> int:
    """Assign ``offset`` to every buffer (greedy by size, best-fit gap);
    returns the arena size."""
    keys: list[tuple[int, int]] = []  # (offset, placement order) of the placed buffers, sorted
    spans: list[tuple[int, int, int, int]] = []  # (first, last, offset, aligned end) in the same order
    total = 0
    for order, b in enumerate(sorted(buffers, key=lambda b: (-b.size, b.first, str(b.key)))):
        off = 0
        best = None
        first, last, size = b.first, b.last, b.size
        for p_first, p_last, p_off, p_end in spans:  # the live ones by offset: smallest gap that fits
            if p_first <= last and first <= p_last:
                gap = p_off - off
                if gap >= size and (best is None or gap < best[1]):
                    best = (off, gap)
                off = max(off, p_end)
        b.offset = best[0] if best is not None else off  # else after the last live buffer
        end = b.offset + align(size)
        i = bisect.bisect(keys, (b.offset, order))
        keys.insert(i, (b.offset, order))
        spans.insert(i, (first, last, b.offset, end))
        total = max(total, end)
    return total


def lower_bound(buffers: Sequence[Buffer]) -> int:
    """The most (aligned) bytes live at any one step."""
    if not buffers:
        return 0
    delta = [0] * (max(b.last for b in buffers) + 2)
    for b in buffers:
        size = align(b.size)
        delta[b.first] += size
        delta[b.last + 1] -= size
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def value_bytes(v: Value) -> int | None:
    """Bytes of a value with a static tensor type, else ``None``."""
    t = v.type
    if not isinstance(t, TensorType) or not t.is_static:
        return None
    itemsize = _itemsize(t.dtype)
    return math.prod(t.shape) * itemsize if itemsize else None


@functools.lru_cache(maxsize=None)
def _itemsize(dtype: DataType) -> int:
    """Bytes per element of ``dtype`` in a numpy array; 0 without a numpy type or for objects."""
    try:
        np_type = np.dtype(dtype.numpy)
    except TypeError:
        return 0
    return 0 if np_type == np.dtype(object) else np_type.itemsize


def plan_graph(graph: Graph, sizes: dict[str, int] | None = None) -> MemoryPlan:
    """Plan the intermediates of ``graph`` (nodes in their current order).

    ``sizes`` overrides / supplies byte sizes per value name (for dynamic
    shapes, from the shapes of a run).  Graph inputs, initializers and graph
    outputs are not planned (they live outside the arena); values whose size
    is unknown are listed in ``unplanned``.
    """
    buffers, unplanned = _buffers(graph, sizes or {})
    peak = plan_offsets(buffers)
    return MemoryPlan(buffers, peak, sum(align(b.size) for b in buffers), lower_bound(buffers), unplanned)


def live_peak_bytes(graph: Graph) -> int:
    """The most bytes of statically sized intermediates live at any one node
    of ``graph``: ``lower_bound(_buffers(graph, {})[0])`` in one walk, with
    plain ints (no :class:`Buffer` records, no numpy: this runs at every
    NumPy partition's warm-up)."""
    first, last, values = _lifetimes(graph)
    delta = [0] * (len(graph.nodes) + 1)
    for name, f in first.items():
        size = value_bytes(values[name])
        if size is not None:
            size = align(size)
            delta[f] += size
            delta[last[name] + 1] -= size
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def _lifetimes(graph: Graph) -> tuple[dict[str, int], dict[str, int], dict[str, Value]]:
    """The intermediates of ``graph`` (neither inputs, initializers nor
    outputs): the step that first writes each, the last step that reads it
    (written but never read: the writing step), and its value."""
    outside = {v.name for v in graph.inputs} | set(graph.initializers) | {v.name for v in graph.outputs}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    values: dict[str, Value] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.outputs:
            if v is not None and v.name and v.name not in outside:
                name = v.name
                if name not in first:
                    first[name] = last[name] = i
                values[name] = v
        for v in node.all_inputs():
            if v is not None and v.name in first:
                last[v.name] = i
    return first, last, values


def _buffers(graph: Graph, sizes: dict[str, int]) -> tuple[list[Buffer], list[str]]:
    """The intermediates of ``graph`` with their sizes and lifetimes, and the
    names of those whose size is unknown."""
    first, last, values = _lifetimes(graph)
    buffers, unplanned = [], []
    for name, f in first.items():
        size = sizes.get(name)
        if size is None:
            size = value_bytes(values[name])
        if size is None:
            unplanned.append(name)
            continue
        buffers.append(Buffer(name, int(size), f, last[name]))
    return buffers, unplanned
