"""Planned host memory for a compiled NumPy partition.

Steps whose kernel writes into a caller-given buffer (``accepts_out``: Conv,
FusedConv and the fused chains headed by them) get their output in one arena
per run, at offsets from the core's lifetime planner
(:func:`nnrt_core.runtime.memory_plan.plan_offsets`, greedy by size, best fit), so
buffers alive at the same time never share bytes and the others reuse them.

Lifetimes are alias-aware.  A kernel that does not write into a planned
buffer may return a view of its inputs (Reshape, Transpose, Slice,
Identity...), so, unless its op is in :data:`FRESH_OUTPUT_OPS` (kernels
checked to always allocate their outputs), its outputs count as readers of
every arena buffer its inputs may alias, transitively: a buffer lives until the last read of any
value that may be a view of it.  A buffer that may alias a graph output is
not planned at all (the caller keeps outputs after the arena is reused).

Arenas are pooled: a run takes one (with its views prepared) and gives it
back at the end, so concurrent runs never share one, and a steady stream of
runs allocates nothing.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Sequence

import numpy as np

from nnrt_core.plugin_api import Record
from nnrt_core.plugin_api import Buffer, lower_bound, plan_offsets

__all__ = ["ArenaPlan", "plan_arena", "FRESH_OUTPUT_OPS"]

#: standard-domain ops whose NumPy kernels always return new arrays, never a
#: view of (or a write into) an input: their outputs alias no arena buffer
FRESH_OUTPUT_OPS = frozenset({"Softmax", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul", "Add", "Sub",
                              "Mul", "Div"})
#: arenas up to this size are allocated and touched at build (``ArenaPlan.prefault``)
PREFAULT_LIMIT = 256 << 20
#: the stride at which :meth:`ArenaPlan.prefault` touches an arena (the smallest page size)
PAGE_BYTES = 4096


class _Slot(Record):
    __slots__ = ("step", "shape", "dtype", "offset")
    step: int  #: index of the writing step
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int

    def __init__(self, step: int, shape: tuple[int, ...], dtype: np.dtype, offset: int = 0) -> None:
        self.step, self.shape, self.dtype, self.offset = step, shape, dtype, offset


class ArenaPlan:
    """Offsets of the planned step outputs and a pool of arenas."""

    def __init__(self, slots: list[_Slot], size: int, naive: int, lower: int) -> None:
        self.slots = slots
        self.size = size
        self.naive_bytes = naive
        self.lower_bound_bytes = lower
        self.steps = {s.step for s in slots}
        self._pool: list[dict[int, np.ndarray]] = []
        self._lock = threading.Lock()
        self.allocated = 0  #: arenas created so far (one per concurrent run at most)

    def acquire(self) -> dict[int, np.ndarray]:
        """Step index -> its output buffer, in an arena no other run holds."""
        with self._lock:
            if self._pool:
                return self._pool.pop()
            self.allocated += 1
        return self._views(np.empty(self.size, np.uint8))

    def _views(self, memory: np.ndarray) -> dict[int, np.ndarray]:
        """Step index -> its output buffer in ``memory`` (one arena's bytes)."""
        return {s.step: memory[s.offset:s.offset + math.prod(s.shape) * s.dtype.itemsize]
                .view(s.dtype).reshape(s.shape) for s in self.slots}

    def release(self, views: dict[int, np.ndarray]) -> None:
        with self._lock:
            self._pool.append(views)

    def prefault(self, limit: int = PREFAULT_LIMIT) -> bool:
        """Allocate the first arena now and touch its pages (the first run
        would fault them in); nothing when one exists or it is over ``limit`` bytes."""
        if self.allocated or self.size > limit:
            return False
        with self._lock:
            self.allocated += 1
        memory = np.empty(self.size, np.uint8)
        # one byte of each page written (not the whole arena: the runs overwrite it, and clearing
        # reused heap memory cost a memset of the arena per build; not through every view: they overlap)
        memory[::PAGE_BYTES] = 0
        self.release(self._views(memory))
        return True

    def describe(self) -> dict[str, Any]:
        return {"arena_bytes": self.size, "arena_values": len(self.slots), "arena_naive_bytes": self.naive_bytes,
                "arena_lower_bound_bytes": self.lower_bound_bytes}


def plan_arena(steps: Sequence[Any], output_slots: Sequence[int], const_slots: set[int],
               candidates: dict[int, tuple[tuple[int, ...], np.dtype]],
               fresh: set[int] = frozenset()) -> ArenaPlan | None:
    """Plan the outputs of ``candidates`` (step index -> static output shape
    and dtype; the step has exactly one output slot and accepts ``out=``);
    ``fresh`` steps allocate their outputs (no aliasing).

    ``steps`` need ``ins``, ``outs`` and ``scope_slots`` (register slots);
    ``None`` when nothing can be planned."""
    if not candidates:
        return None
    # which arena buffers (by writing step) each register slot may alias
    may_alias: dict[int, set[int]] = {}
    # last step reading each slot
    last_read: dict[int, int] = {}
    for i, st in enumerate(steps):
        reads = [s for s in list(st.ins) + list(st.scope_slots) if s >= 0]
        for s in reads:
            last_read[s] = i
        if i in candidates:
            may_alias[st.outs[0]] = {i}
            continue
        if i in fresh:
            continue
        inherited: set[int] = set()
        for s in reads:
            inherited |= may_alias.get(s, set())
        if inherited:
            for o in st.outs:
                may_alias[o] = set(inherited)
    escaping: set[int] = set()
    for s in output_slots:
        escaping |= may_alias.get(s, set())
    # a buffer lives until the last read of any slot that may alias it
    last_use: dict[int, int] = {}
    for s, owners in may_alias.items():
        end = last_read.get(s)
        if end is None:
            continue
        for step in owners:
            last_use[step] = max(last_use.get(step, step), end)
    slots: list[_Slot] = []
    buffers: list[Buffer] = []
    for step, (shape, dtype) in sorted(candidates.items()):
        if step in escaping or steps[step].outs[0] in const_slots:
            continue
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize  # static int shapes: math.prod (np.prod costs µs)
        if nbytes == 0:
            continue
        slots.append(_Slot(step, tuple(shape), np.dtype(dtype)))
        buffers.append(Buffer(step, nbytes, step, last_use.get(step, step)))
    if not buffers:
        return None
    size = plan_offsets(buffers)
    by_step = {b.key: b.offset for b in buffers}
    for s in slots:
        s.offset = by_step[s.step]
    return ArenaPlan(slots, size, sum(b.size for b in buffers), lower_bound(buffers))
