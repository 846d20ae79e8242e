"""Work on background threads that a fork and the interpreter's exit wait for.

nnrt starts a few short jobs on threads to use an idle core during a cold
start (onnx's schema registry, ONNX Runtime's set-up session, the heap
prefault).  Such a job may hold a native lock or be inside a C++ static's
initialization: a child forked then would wait forever for a thread it does
not have, and an exit would run static destructors under it.  So every
thread started here is joined before any ``fork`` (``os.register_at_fork``)
and at exit (``atexit``); both hooks are registered once, on the first start.
"""
from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Callable

__all__ = ["start", "wait_all"]

_threads: list[threading.Thread] = []
_lock = threading.Lock()
_hooked = False


def start(target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
    """Run ``target(*args)`` on a daemon thread called ``name`` that forks and
    the exit wait for; the started thread."""
    global _hooked
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    with _lock:
        if not _hooked:
            atexit.register(wait_all)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(before=wait_all)
            _hooked = True
        _threads[:] = [t for t in _threads if t.is_alive()]
        _threads.append(thread)
    thread.start()
    return thread


def wait_all() -> None:
    """Join every thread :func:`start` started that is still running."""
    with _lock:
        running = [t for t in _threads if t.is_alive()]
    for t in running:
        t.join()
