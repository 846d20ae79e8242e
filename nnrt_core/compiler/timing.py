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
from typing import Iterator

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


@contextmanager
def stage(name: str, *, exclude_from: str | None = None) -> Iterator[None]:
    """Time the block as ``name`` (added up over repeats); with
    ``exclude_from``, the time is also taken off that enclosing stage."""
    times = _current.get()
    if times is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        times.add(name, dt)
        if exclude_from is not None:
            times.add(exclude_from, -dt)
