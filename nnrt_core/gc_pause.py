"""``paused_gc()``: the cyclic garbage collector off while modules are imported.

Importing creates many objects (module dicts, functions, classes) and no
garbage, yet each 700 allocations start a collection that walks the young
objects, and every tenth a larger one: ~20 collections, 3-8 ms of a fresh
process's ``from nnrt_core import Session``, ~15 more while a session's
backend plugins are imported.  ``nnrt_core.__getattr__`` (the lazy public
names) and the registry's plugin imports run inside ``paused_gc()``; the
collector is re-enabled on exit (also when the import raises) if it was
enabled on entry, and the objects made meanwhile are collected as usual
afterwards.  The import paths also promote what they made to the oldest
generation on exit (``promote=True``, see :class:`paused_gc`).

``compile_model`` builds inside ``paused_gc()`` too: a build makes thousands
of IR objects that mostly live on in the session (4-7 young collections per
TFLite build of ~100 nodes, and every few builds a full one over the whole
heap).  Its little garbage (dropped nodes and values) is collected after
the build; peak memory did not move on the largest models (BirdNET,
PP-OCRv4 det, a 1118-node decoder: maxrss within 0.5 MB).
"""
from __future__ import annotations

import gc
from typing import Any

__all__ = ["paused_gc"]


class paused_gc:  # noqa: N801 - used like a function: ``with paused_gc():``
    """Context manager: ``gc.disable()`` on entry when enabled, ``gc.enable()`` on exit.

    ``promote=True`` (module imports only): on exit the objects made
    meanwhile go straight to the oldest generation (``gc.freeze()`` then
    ``gc.unfreeze()``, which moves them without a scan), where the modules,
    classes and functions an import makes belong, instead of being scanned by
    the next young collection and again by the middle one.  Skipped when the
    process has frozen objects of its own (``gc.get_freeze_count()``), which
    ``unfreeze`` would release."""

    __slots__ = ("paused", "promote")

    def __init__(self, promote: bool = False) -> None:
        self.promote = promote

    def __enter__(self) -> None:
        self.paused = gc.isenabled()
        if self.paused:
            gc.disable()

    def __exit__(self, *exc: Any) -> None:
        if self.paused:
            if self.promote and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
