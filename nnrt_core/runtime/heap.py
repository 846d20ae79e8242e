"""Keep freed activation memory for reuse instead of returning it to the OS.

Every NumPy kernel returns a fresh array.  With glibc's default settings an
allocation above the (dynamic) mmap threshold gets new pages from the kernel
and each first touch of a page faults; on a VM a convolution can spend more
time faulting in its im2col buffer and output than computing.  Raising
glibc's ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` (once, when a backend
asks: the NumPy backend when its first partition is compiled, the ONNX
Runtime backend when a build selects it, the NPU emulator at warm-up) makes
large blocks come from the heap and stay there after ``free``, so the next
run, or ONNX Runtime's arena growing at its first run, reuses
already-mapped pages (:func:`prefault_heap` maps them at build;
:func:`prefault_heap_async` on a background thread, while the build goes
on).  The cost is that the process keeps its peak heap size.

Set ``NNRT_NUMPY_MALLOC_TUNING=0`` to leave the allocator alone.  Only glibc
is touched; elsewhere this is a no-op.
"""
from __future__ import annotations

import ctypes
import os
import platform
import threading
from typing import Any

from nnrt_core import background

__all__ = ["tune_allocator", "prefault_heap", "prefault_heap_async", "wait_for_prefault"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 128 << 20  # blocks above this still get their own mapping
_TRIM_THRESHOLD = 256 << 20  # free memory kept at the top of the heap

_done = False
_tuned = False
_touched = 0  # the most bytes prefault_heap touched (or prefault_heap_async is touching) in this process
_pending: threading.Thread | None = None  # prefault_heap_async's thread, until waited for
_block: Any = None  # the array it touches, held until waited for
_lock = threading.Lock()


def tune_allocator() -> bool:
    """Apply the settings once; True when glibc accepted them."""
    global _done, _tuned
    if _done:
        return _tuned
    _done = True
    if os.environ.get("NNRT_NUMPY_MALLOC_TUNING", "1") == "0" or platform.system() != "Linux":
        return False
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1 and ok
    _tuned = ok
    return ok


def prefault_heap(nbytes: int) -> bool:
    """Touch ``nbytes`` of heap pages and free them again: with the tuned
    allocator they stay mapped, so the first run's fresh arrays reuse them
    instead of faulting pages in (the warm-up of a partition).  Nothing when
    the allocator is not tuned or ``nbytes`` is not below the mmap threshold,
    nor when an earlier call in this process touched as many bytes.  It is
    :func:`prefault_heap_async` waited for at once."""
    started = prefault_heap_async(nbytes)
    wait_for_prefault()
    return started


def prefault_heap_async(nbytes: int) -> bool:
    """:func:`prefault_heap` with the pages touched on a background thread,
    so that a build goes on meanwhile (a page's first touch costs ~1-10 us on
    a VM).  The block is allocated on the calling thread, in the heap that
    thread's later allocations come from (glibc gives other threads arenas of
    their own), and held until :func:`wait_for_prefault` (or the next
    prefault) waits for the thread and frees it: the pages then lie together
    in the heap, for the first run, not spent on the build's own
    allocations meanwhile."""
    global _touched, _pending, _block
    wait_for_prefault()
    if not _tuned or not 0 < nbytes < _MMAP_THRESHOLD:
        return False
    with _lock:
        if nbytes <= _touched:
            return True
        import numpy as np

        _block = np.empty(nbytes, np.uint8)
        _touched = nbytes
        # a ctypes call releases the GIL
        _pending = background.start(ctypes.memset, "nnrt-heap-prefault", _block.__array_interface__["data"][0], 0,
                                    nbytes)
    return True


def wait_for_prefault() -> None:
    """Wait until :func:`prefault_heap_async` 's pages are touched and free
    its block (nothing when none is pending)."""
    global _pending, _block
    with _lock:
        t, _pending = _pending, None
        if t is not None:
            t.join()
        _block = None
