"""Emulated device memory: an arena with a first-fit allocator.  Workspace
offsets are planned at compile time by the core's lifetime planner
(:mod:`nnrt_core.runtime.memory_plan`)."""
from __future__ import annotations

import bisect
import gc
import threading

import numpy as np

from nnrt_core.errors import ExecutionError
from nnrt_core.plugin_api import get_logger
from nnrt_core.plugin_api import ALIGN, Buffer, align, plan_offsets  # the core's lifetime planner

__all__ = ["ALIGN", "align", "DeviceMemoryError", "DeviceArena", "Buffer", "plan_offsets"]

log = get_logger("nnrt.npu_emu")


class DeviceMemoryError(ExecutionError):
    """The emulated device memory cannot hold a requested tensor."""


class DeviceArena:
    """``size`` bytes of device memory (lazily committed host pages) with a
    thread-safe first-fit allocator over sorted free blocks."""

    def __init__(self, size: int, name: str = "npu") -> None:
        self.size = int(size)
        self.name = name
        self._mem: np.ndarray | None = None
        self._lock = threading.Lock()
        self._free: list[tuple[int, int]] = [(0, self.size)]  # (offset, size), sorted by offset
        self._used: dict[int, int] = {}
        #: frees not yet applied: ``free`` may run in a tensor's finalizer, which the garbage collector can
        #: call inside ``alloc`` on the thread that holds the (non-reentrant) lock
        self._pending: list[int] = []
        self.peak = 0

    @property
    def mem(self) -> np.ndarray:
        if self._mem is None:
            with self._lock:
                if self._mem is None:
                    self._mem = np.zeros(self.size, dtype=np.uint8)  # calloc: pages committed on touch
        return self._mem

    @property
    def in_use(self) -> int:
        with self._lock:
            self._drain()
            return sum(self._used.values())

    def alloc(self, nbytes: int, what: str = "tensor") -> int:
        """The offset of a free block of ``nbytes`` (aligned).  When none is
        left, the cyclic garbage collector runs once and the search is
        repeated: sessions dropped by the user keep their device buffers
        until their reference cycles are collected, and a user building
        sessions in a loop must not see a full device because of them."""
        n = align(max(int(nbytes), 1))
        off = self._first_fit(n)
        if off is None:
            before = self.in_use
            gc.collect()  # outside the lock: finalizers free blocks through ``free``
            off = self._first_fit(n)
            log.info("device memory of %s full for %d bytes: garbage collection gave back %d bytes%s", self.name,
                     n, before - self.in_use, "" if off is not None else ", not enough")
        if off is not None:
            return off
        with self._lock:
            free = sum(s for _, s in self._free)
            largest = max((s for _, s in self._free), default=0)
        raise DeviceMemoryError(
            f"device memory of {self.name} exhausted: {what} needs {n} bytes, {free} bytes free "
            f"(largest block {largest}) of {self.size}")

    def _first_fit(self, n: int) -> int | None:
        """Take the first free block of ``n`` aligned bytes; ``None`` when none is large enough."""
        with self._lock:
            self._drain()
            for i, (off, sz) in enumerate(self._free):
                if sz >= n:
                    if sz == n:
                        del self._free[i]
                    else:
                        self._free[i] = (off + n, sz - n)
                    self._used[off] = n
                    self.peak = max(self.peak, sum(self._used.values()))
                    return off
        return None

    def free(self, off: int) -> None:
        """Give the block at ``off`` back.  Never blocks: when the lock is
        taken (another thread, or this one inside ``alloc`` when a finalizer
        runs) the block is applied by the lock's holder or the next call."""
        self._pending.append(off)  # atomic
        if self._lock.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self._lock.release()

    def _drain(self) -> None:
        """Apply the pending frees (the lock is held)."""
        while self._pending:
            self._release(self._pending.pop())

    def _release(self, off: int) -> None:
        n = self._used.pop(off, None)
        if n is None:
            return
        i = bisect.bisect(self._free, (off, 0))
        self._free.insert(i, (off, n))
        # coalesce with neighbours
        if i + 1 < len(self._free) and self._free[i][0] + self._free[i][1] == self._free[i + 1][0]:
            self._free[i] = (off, self._free[i][1] + self._free[i + 1][1])
            del self._free[i + 1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == self._free[i][0]:
            self._free[i - 1] = (self._free[i - 1][0], self._free[i - 1][1] + self._free[i][1])
            del self._free[i]

    def view(self, off: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        if off < 0 or off + n > self.size:
            raise DeviceMemoryError(f"access [{off}, {off + n}) outside device memory of {self.name}")
        return self.mem[off:off + n].view(dt).reshape(shape)
