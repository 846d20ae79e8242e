"""How many threads one run may use: set by whoever runs requests side by
side (streams, the ``run_async`` pool), read by backends that can size their
work to it.

A stream with ``k`` requests executing at once on a machine with ``c`` cores
gives each run ``max(1, c // k)`` threads (OpenVINO's throughput streams
split the cores the same way).  A plain ``Session.run`` sets nothing: the
budget is ``None`` and each backend uses its own policy.  The value lives in
a ``ContextVar``, so it follows the run on its thread and costs one lookup.

Backends honour it where they can: the ONNX Runtime backend runs a request
with a budget below the core count on a session with that many intra-op
threads, and the NumPy backend does not split a convolution over more
threads than the budget allows.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

__all__ = ["CORES", "thread_budget", "use_thread_budget", "share_of_cores"]

#: logical cores of this machine
CORES = os.cpu_count() or 1

_budget: ContextVar[int | None] = ContextVar("nnrt_thread_budget", default=None)


#: ``thread_budget()``: threads the current run may use, or ``None`` when nobody said (the context
#: variable's own ``get``: a C call, no Python frame, on the per-call path of small models)
thread_budget: Callable[[], int | None] = _budget.get


@contextmanager
def use_thread_budget(threads: int | None) -> Iterator[None]:
    """Run the block with a budget of ``threads`` (``None``: no budget)."""
    token = _budget.set(threads)
    try:
        yield
    finally:
        _budget.reset(token)


def share_of_cores(concurrent_runs: int) -> int:
    """Each run's share when ``concurrent_runs`` run at once: ``max(1, cores // runs)``."""
    return max(1, CORES // max(1, concurrent_runs))
