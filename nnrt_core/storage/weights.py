"""Weights shared between sessions: a process-wide, content-addressed store.

Every session interns its model's constant arrays here right after loading:
an array whose bytes (dtype, shape and an XXH3-128 digest, confirmed by a
byte comparison) are already held by another live session is replaced by
that session's array, so N sessions of one model hold its weights once
(identical constants inside one model are held once too).
Interned arrays are read-only views (the caller's own arrays keep their
flags); the store keeps only weak references, so weights go away with the
last session using them.  Digesting costs about 4 ms per 100 MB, so an
array is digested only when it may match: the store first keys it by dtype,
shape and a hash of three 256-byte samples (start, middle, end), and only an
array whose sample key is already held is digested (the held array too, once).
A session whose weights no other live array resembles (the first build of a
model) digests nothing.
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


class _Held:
    """One array the store holds: a weak reference to its read-only view, and its
    digest once some other array with the same sample key made it worth taking."""

    __slots__ = ("ref", "digest")

    def __init__(self, ref: "weakref.ref[np.ndarray]", digest: bytes | None) -> None:
        self.ref, self.digest = ref, digest


class WeightStore:
    """Content-addressed weak store of read-only constant arrays."""

    def __init__(self) -> None:
        #: sample key (dtype, shape, samples' hash) -> the arrays held under it
        self._held: dict[tuple, list[_Held]] = {}
        #: sample keys with an array gone (appended by weakref callbacks, which may run
        #: while ``_lock`` is held: they take no lock; ``_prune`` empties it under the lock)
        self._gone: list[tuple] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._prune()
            return sum(len(v) for v in self._held.values())

    def intern(self, array: np.ndarray) -> tuple[np.ndarray, bool]:
        """(the array to use, whether it came from another holder)."""
        if array.nbytes < MIN_SHARED_BYTES or array.dtype.hasobject or not array.flags.c_contiguous:
            return array, False
        raw = memoryview(array.reshape(-1).view(np.uint8))
        key = (array.dtype.str, array.shape, _samples(raw))
        with self._lock:
            if self._gone:
                self._prune()
            held = self._held.get(key)
            digest = None
            if held:  # an array like it is held: compare digests (then bytes)
                digest = xxhash.xxh3_128(raw).digest()
                for entry in held:
                    view = entry.ref()
                    if view is None:
                        continue
                    if entry.digest is None:
                        entry.digest = xxhash.xxh3_128(memoryview(view.reshape(-1).view(np.uint8))).digest()
                    if entry.digest == digest and _same_bytes(view, array):
                        return view, True
            view = array.view()
            view.flags.writeable = False  # the caller's array keeps its own flags
            gone = self._gone
            entry = _Held(weakref.ref(view, lambda _r, _k=key: gone.append(_k)), digest)
            self._held.setdefault(key, []).append(entry)
            return view, False

    def _prune(self) -> None:
        """Drop the entries of arrays gone since the last call (under ``_lock``)."""
        while self._gone:
            key = self._gone.pop()
            held = self._held.get(key)
            if held is not None:
                held[:] = [e for e in held if e.ref() is not None]
                if not held:
                    del self._held[key]


def _samples(raw: memoryview) -> int:
    """A hash of 256 bytes at the start, middle and end of ``raw`` (at least
    :data:`MIN_SHARED_BYTES` long): arrays that differ there need no digest."""
    n = len(raw)
    mid = max(0, n // 2 - 128)
    h = xxhash.xxh3_64(raw[:256])
    h.update(raw[mid:mid + 256])
    h.update(raw[max(0, n - 256):])
    return h.intdigest()


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
