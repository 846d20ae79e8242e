"""How many session runs are in flight in this process.

``Session.run`` counts itself in (``with RUNNING:``); a background build
(:mod:`nnrt_core.compiler.background`) calls :func:`wait_idle` and sleeps
while runs are going, so that it does not take the interpreter from them.
A sleeping build is woken when the last run ends; it does not poll (a
thread that wakes to look asks for the interpreter lock, and on a busy
machine each hand-over costs the run a wait for the scheduler).

The count is the length of a deque (its appends and pops are thread-safe
without a lock): a run costs one append and one pop."""
from __future__ import annotations

import threading
from collections import deque

__all__ = ["RUNNING", "enter", "leave", "in_flight", "wait_idle"]

_runs: deque[None] = deque()  #: one entry per run in flight
_idle = threading.Condition(threading.Lock())  #: wait_idle sleeps on it
_waiters = [0]  #: threads in wait_idle (changed under ``_idle``)


class _Running:
    """``with RUNNING:`` counts the block as a run in flight (:func:`enter` / :func:`leave` call it)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _runs.append(None)

    def __exit__(self, *exc: object) -> None:
        _runs.pop()
        if not _runs and _waiters[0]:
            with _idle:
                _idle.notify_all()


RUNNING = _Running()


def enter() -> None:
    """A run starts (pair with :func:`leave` in a ``finally``)."""
    RUNNING.__enter__()


def leave() -> None:
    """A run ended (normally or with an error); the last one wakes :func:`wait_idle`."""
    RUNNING.__exit__()


def in_flight() -> int:
    """Runs in flight now, in every session of the process."""
    return len(_runs)


def wait_idle(timeout: float) -> bool:
    """Sleep until no run is in flight (``True``) or ``timeout`` seconds passed (``False``)."""
    with _idle:
        _waiters[0] += 1  # before the runs are looked at: a run that ends after this notifies
        try:
            return _idle.wait_for(lambda: not _runs, timeout)
        finally:
            _waiters[0] -= 1
