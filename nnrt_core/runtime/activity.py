"""How many session runs are in flight in this process.

``Session.run`` counts itself in (:func:`enter` / :func:`leave`); a
background build (:mod:`nnrt_core.compiler.background`) calls
:func:`wait_idle` and sleeps while runs are going, so that it does not take
the interpreter from them.  A sleeping build is woken when the last run
ends; it does not poll (a thread that wakes to look asks for the
interpreter lock, and on a busy machine each hand-over costs the run a wait
for the scheduler).  Two lock round trips per run (~0.2 us)."""
from __future__ import annotations

import threading

__all__ = ["RUNNING", "enter", "leave", "in_flight", "wait_idle"]

_idle = threading.Condition(threading.Lock())
_count = [0, 0]  #: runs in flight, threads in wait_idle (lists: updated in place under ``_idle``)


def enter() -> None:
    """A run starts (pair with :func:`leave` in a ``finally``)."""
    with _idle:
        _count[0] += 1


def leave() -> None:
    """A run ended (normally or with an error); the last one wakes :func:`wait_idle`."""
    with _idle:
        _count[0] -= 1
        if not _count[0] and _count[1]:
            _idle.notify_all()


class _Running:
    """``with RUNNING:`` counts the block as a run in flight (:func:`enter` / :func:`leave`)."""

    __slots__ = ()

    def __enter__(self) -> None:
        with _idle:
            _count[0] += 1

    def __exit__(self, *exc: object) -> None:
        leave()


RUNNING = _Running()


def in_flight() -> int:
    """Runs in flight now, in every session of the process (read without the lock: a hint)."""
    return _count[0]


def wait_idle(timeout: float) -> bool:
    """Sleep until no run is in flight (``True``) or ``timeout`` seconds passed (``False``)."""
    with _idle:
        if not _count[0]:
            return True
        _count[1] += 1
        try:
            return _idle.wait_for(lambda: not _count[0], timeout)
        finally:
            _count[1] -= 1
