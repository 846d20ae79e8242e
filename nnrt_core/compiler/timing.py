"""Where a build spends its time: named stages, timed with ``perf_counter``.

``compile_model`` opens a :class:`BuildTimes` for the build; the stages time
themselves with :func:`stage` (a no-op outside a build).  ``Session.stats()``
reports them under ``"build"`` (seconds):

``select``   the backends of the config: their plugins imported and initialized
``load``     the model read, checked and converted to the IR
``optimize`` the passes, constant folding on the host backend included
``place``    capabilities, placement and partitioning (compiling excluded)
``compile:<backend>``  compiling that backend's partitions
``explain``  the placement report and the compiled model assembled
``warmup``   the partitions' ``warm_up()`` (first-call costs paid at build)
``cache``    keying, loading or storing the model cache (with ``cache_dir``)
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

__all__ = ["BuildTimes", "stage", "current"]

_current: ContextVar["BuildTimes | None"] = ContextVar("nnrt_build_times", default=None)


class BuildTimes(dict[str, float]):
    """Stage name -> seconds; a nested stage is not subtracted from its parent
    except ``compile:*``, which :func:`stage` keeps out of ``place``."""

    @contextmanager
    def active(self) -> Iterator["BuildTimes"]:
        """Make this the build that :func:`stage` records into."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    def add(self, name: str, seconds: float) -> None:
        self[name] = self.get(name, 0.0) + seconds


def current() -> BuildTimes | None:
    """The build being timed in this context, if any."""
    return _current.get()


class stage:  # noqa: N801 - used like a function: ``with stage("load"):``
    """Time the block as ``name`` (added up over repeats); with
    ``exclude_from``, the time is also taken off that enclosing stage.  A
    class, not a ``@contextmanager``: a build opens ~20 stages, and a
    generator-based context manager costs a few µs each."""

    __slots__ = ("name", "exclude_from", "times", "t0")

    def __init__(self, name: str, *, exclude_from: str | None = None) -> None:
        self.name, self.exclude_from = name, exclude_from

    def __enter__(self) -> None:
        self.times = _current.get()
        if self.times is not None:
            self.t0 = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        times = self.times
        if times is None:
            return
        dt = time.perf_counter() - self.t0
        times.add(self.name, dt)
        if self.exclude_from is not None:
            times.add(self.exclude_from, -dt)
