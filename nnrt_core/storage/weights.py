"""Weights shared between sessions: a process-wide, content-addressed store.

Every session interns its model's constant arrays here right after loading:
an array whose bytes (dtype, shape and an XXH3-128 digest, confirmed by a
byte comparison) are already held by another live session is replaced by
that session's array, so N sessions of one model hold its weights once
(identical constants inside one model are held once too).
Interned arrays are read-only views (the caller's own arrays keep their
flags); the store keeps only weak references, so weights go away with the
last session using them.  Digesting costs about 4 ms per 100 MB here.
"""
from __future__ import annotations

import threading
import weakref
from typing import Iterator

import numpy as np
import xxhash

from nnrt_core.ir import Graph
from nnrt_core.record import Record

__all__ = ["WeightStore", "SharingReport", "default_store", "share_graph_weights"]

#: smaller arrays are not worth a digest
MIN_SHARED_BYTES = 4096


class SharingReport(Record):
    """What interning one graph's constants found."""

    __slots__ = ("arrays", "bytes", "shared_arrays", "shared_bytes")
    arrays: int  #: constant arrays big enough to share
    bytes: int  #: their bytes
    shared_arrays: int  #: of those, already held by another session
    shared_bytes: int

    def __init__(self, arrays: int = 0, bytes: int = 0, shared_arrays: int = 0, shared_bytes: int = 0) -> None:
        self.arrays, self.bytes, self.shared_arrays, self.shared_bytes = arrays, bytes, shared_arrays, shared_bytes


class WeightStore:
    """Content-addressed weak store of read-only constant arrays."""

    def __init__(self) -> None:
        self._arrays: "weakref.WeakValueDictionary[tuple, np.ndarray]" = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._arrays)

    def intern(self, array: np.ndarray) -> tuple[np.ndarray, bool]:
        """(the array to use, whether it came from another holder)."""
        if array.nbytes < MIN_SHARED_BYTES or array.dtype.hasobject or not array.flags.c_contiguous:
            return array, False
        raw = memoryview(array.reshape(-1).view(np.uint8))
        key = (array.dtype.str, array.shape, xxhash.xxh3_128(raw).digest())
        with self._lock:
            held = self._arrays.get(key)
            if held is not None and _same_bytes(held, array):
                return held, True
            view = array.view()
            view.flags.writeable = False  # the caller's array keeps its own flags
            self._arrays[key] = view
            return view, False


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Byte equality of two C-contiguous arrays of one dtype and shape, compared as
    machine words (``memoryview ==`` compares item by item in Python: ~60 ms for 8 MB)."""
    x, y = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    if x.size != y.size:
        return False
    if x.size % 8 == 0:
        x, y = x.view(np.uint64), y.view(np.uint64)
    return bool(np.array_equal(x, y))


_default = WeightStore()


def default_store() -> WeightStore:
    return _default


def _constants(graph: Graph) -> Iterator:
    yield from graph.initializers.values()
    for node in graph.nodes if graph.has_subgraphs() else ():
        for sub in node.subgraphs():
            yield from _constants(sub)


def share_graph_weights(graph: Graph, store: WeightStore | None = None) -> SharingReport:
    """Intern ``graph``'s constants (sub-graphs included) in ``store``."""
    store = store if store is not None else _default
    report = SharingReport()
    for value in _constants(graph):
        arr = value.const
        if not isinstance(arr, np.ndarray) or arr.nbytes < MIN_SHARED_BYTES:
            continue
        value.const, shared = store.intern(arr)
        report.arrays += 1
        report.bytes += arr.nbytes
        if shared:
            report.shared_arrays += 1
            report.shared_bytes += arr.nbytes
    return report
