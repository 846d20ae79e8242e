"""``paused_gc()``: the cyclic garbage collector off while modules are imported.

Importing creates many objects (module dicts, functions, classes) and no
garbage, yet each 700 allocations start a collection that walks the young
objects, and every tenth a larger one: ~20 collections, 3-8 ms of a fresh
process's ``from nnrt_core import Session``, ~15 more while a session's
backend plugins are imported.  ``nnrt_core.__getattr__`` (the lazy public
names) and the registry's plugin imports run inside ``paused_gc()``; the
collector is re-enabled on exit (also when the import raises) if it was
enabled on entry, and the objects made meanwhile are collected as usual
afterwards.
"""
from __future__ import annotations

import gc
from typing import Any

__all__ = ["paused_gc"]


class paused_gc:  # noqa: N801 - used like a function: ``with paused_gc():``
    """Context manager: ``gc.disable()`` on entry when enabled, ``gc.enable()`` on exit."""

    __slots__ = ("paused",)

    def __enter__(self) -> None:
        self.paused = gc.isenabled()
        if self.paused:
            gc.disable()

    def __exit__(self, *exc: Any) -> None:
        if self.paused:
            gc.enable()
