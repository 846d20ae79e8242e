"""The emulated device memory's allocator under the garbage collector."""
from __future__ import annotations

import gc
import threading
import weakref

import pytest

from nnrt_npu_emu.memory import DeviceArena, DeviceMemoryError


class _CollectingLock:
    """A lock that runs the garbage collector right after it is taken: what
    the collector may do at any allocation while the arena's lock is held."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:
            gc.collect(0)  # the young generation: where the cycle of the previous step waits
        return got

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> "_CollectingLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Cycle:
    """Garbage in a reference cycle: only the collector frees it (and runs its finalizer)."""

    def __init__(self) -> None:
        self.me = self


def test_a_finalizer_freeing_device_memory_inside_alloc_does_not_deadlock():
    """Found by the fuzzer (seed 7, case 580): the collector ran an NpuTensor's finalizer
    (``arena.free``) inside ``arena.alloc`` on the thread holding the arena's lock."""
    arena = DeviceArena(1 << 20, "test")
    arena._lock = _CollectingLock()
    done = threading.Event()

    def churn() -> None:
        for _ in range(60):
            block = arena.alloc(64)
            owner = _Cycle()
            weakref.finalize(owner, arena.free, block)
            del owner  # collected inside the next alloc, with the lock held
        done.set()

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    worker.join(30)
    assert done.is_set(), "alloc deadlocked with a finalizer freeing into the same arena"
    gc.collect()
    assert arena.in_use == 0  # every deferred free was applied
    assert arena.alloc(1 << 20) == 0  # and coalesced back into one block


def test_memory_held_by_cyclic_garbage_is_given_back_before_the_device_counts_as_full():
    """Sessions dropped by the user keep their device buffers until their reference cycles are
    collected: an allocation that finds the device full collects them once and succeeds."""
    arena = DeviceArena(1 << 20, "test")
    was_enabled = gc.isenabled()
    gc.disable()  # the collector would otherwise run at a threshold, at random
    try:
        for _ in range(4):
            owner = _Cycle()
            weakref.finalize(owner, arena.free, arena.alloc(1 << 18))
            del owner  # garbage, but still holding a quarter of the device
        assert arena.in_use == 1 << 20
        assert arena.alloc(1 << 19) is not None  # collected, then found
        assert arena.in_use == 1 << 19
        live = arena.alloc(1 << 19)  # noqa: F841 - held: the device is full of live blocks now
        with pytest.raises(DeviceMemoryError, match="device memory of test exhausted: tensor needs 64 bytes, 0 bytes free"):
            arena.alloc(1)
    finally:
        if was_enabled:
            gc.enable()
