"""Specialized plans built on a worker thread while runs go on with the dynamic plan.

A build is Python work (import, passes, lowering: ~0.6 s on MiniLM under the
NPU config) and a thread shares the interpreter with the runs.  A build that
simply ran beside them made the runs of the emulated NPU ~5x slower for as
long as it lasted (each time a run gave the interpreter lock up, in a kernel,
the build kept it for up to the 5 ms switch interval).  So the worker is
courteous (:class:`Courtesy`, a profile hook on the worker thread only):

* while any session run of the process is in flight
  (:mod:`nnrt_core.runtime.activity`) it sleeps until the last one ends;
  one pause lasts at most :data:`MAX_PAUSE_S` (a run might wait for a lock
  the build holds), and a build that has paused for
  :data:`MAX_WAITED_S` in all stops pausing (a process that is never idle still
  gets its plan; its runs then share the interpreter with the build);
* between runs it gives the interpreter up for :data:`YIELD_S` after every
  :data:`SLICE_S` of work, so a run that starts waits at most about that long.

The plan is built while runs are idle; at most ``limit`` signatures per
session are queued or building (one at a time)."""
from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Generic, Hashable, TypeVar

from nnrt_core.runtime.activity import in_flight, wait_idle

__all__ = ["BackgroundBuilds", "Courtesy", "MAX_PAUSE_S", "MAX_WAITED_S", "SLICE_S", "YIELD_S"]

MAX_PAUSE_S = 0.1  #: the longest single pause
MAX_WAITED_S = 5.0  #: pauses per build in all, after which it no longer pauses
SLICE_S = 0.001  #: work between two yields while no run is in flight
YIELD_S = 0.0001  #: how long a yield gives the interpreter up
_EVERY = 32  #: Python calls and returns between two looks at the clock (the hook's own cost)

Key = TypeVar("Key", bound=Hashable)


class Courtesy:
    """The worker thread's profile hook (``sys.setprofile``): pauses while runs
    are in flight, yields between them.  ``waited``: seconds paused so far."""

    __slots__ = ("count", "mark", "waited")

    def __init__(self) -> None:
        self.count, self.mark, self.waited = 0, time.perf_counter(), 0.0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        self.count += 1
        if self.count % _EVERY and event != "c_call":  # before a C call, which may hold the lock a while
            return
        now = time.perf_counter()
        if in_flight() and self.waited < MAX_WAITED_S:
            wait_idle(MAX_PAUSE_S)
            self.mark = time.perf_counter()
            self.waited += self.mark - now
        elif now - self.mark > SLICE_S:
            time.sleep(YIELD_S)
            self.mark = time.perf_counter()


class BackgroundBuilds(Generic[Key]):
    """A queue of keys that ``build(key, courtesy)`` turns into plans on one
    daemon thread, started when a key is queued and ended when the queue is
    empty.  ``build`` stores its result itself and must not raise."""

    def __init__(self, build: Callable[[Key, Courtesy], None], limit: int) -> None:
        self._build = build
        self.limit = limit
        self._queue: deque[Key] = deque()
        self._pending: set[Key] = set()  # queued or building
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, key: Key) -> bool:
        """Queue ``key`` (``True``; also when it is queued already); ``False``
        when ``limit`` keys are pending."""
        with self._cond:
            if key in self._pending:
                return True
            if len(self._pending) >= self.limit:
                return False
            self._pending.add(key)
            self._queue.append(key)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="nnrt-specialize", daemon=True)
                self._thread.start()
        return True

    def pending(self) -> list[Key]:
        """Keys queued or building, oldest first (the one building among them)."""
        with self._cond:
            return sorted(self._pending, key=lambda k: -1 if k not in self._queue else self._queue.index(k))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no key is pending (``True``) or ``timeout`` seconds passed (``False``)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending, timeout)

    def _work(self) -> None:
        courtesy = Courtesy()
        sys.setprofile(courtesy)  # this thread only
        try:
            while True:
                with self._cond:
                    if not self._queue:
                        self._thread = None
                        return
                    key = self._queue.popleft()
                courtesy.waited = 0.0
                try:
                    self._build(key, courtesy)
                finally:
                    with self._cond:
                        self._pending.discard(key)
                        self._cond.notify_all()
        finally:
            sys.setprofile(None)
