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

One build thread per process builds the plans of every session, one at a
time; at most ``limit`` signatures per session are queued or building."""
from __future__ import annotations

import sys
import threading
import time
import weakref
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Generic, Hashable, Iterator, TypeVar

from nnrt_core.logs import get_logger
from nnrt_core.runtime.activity import in_flight, wait_idle

__all__ = ["BackgroundBuilds", "Courtesy", "MAX_PAUSE_S", "MAX_WAITED_S", "SLICE_S", "YIELD_S"]

MAX_PAUSE_S = 0.1  #: the longest single pause
MAX_WAITED_S = 5.0  #: pauses per build in all, after which it no longer pauses
SLICE_S = 0.001  #: work between two yields while no run is in flight
YIELD_S = 0.0001  #: how long a yield gives the interpreter up
_EVERY = 32  #: Python calls and returns between two looks at the clock (the hook's own cost)
log = get_logger("nnrt.session")

Key = TypeVar("Key", bound=Hashable)


class Courtesy:
    """The worker thread's profile hook (``sys.setprofile``, set for a build
    only): pauses while runs are in flight, yields between them.  ``waited``:
    seconds paused in the current build; inside :meth:`holding_locks` it does
    neither (a run may wait for those locks)."""

    __slots__ = ("count", "mark", "waited", "off")

    def __init__(self) -> None:
        self.count, self.mark, self.waited, self.off = 0, time.perf_counter(), 0.0, False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        self.count += 1
        if (self.count % _EVERY and event != "c_call") or self.off:  # before a C call, which may hold the GIL a while
            return
        now = time.perf_counter()
        if in_flight() and self.waited < MAX_WAITED_S:
            wait_idle(MAX_PAUSE_S)
            self.mark = time.perf_counter()
            self.waited += self.mark - now
        elif now - self.mark > SLICE_S:
            time.sleep(YIELD_S)
            self.mark = time.perf_counter()

    @contextmanager
    def holding_locks(self) -> Iterator[None]:
        """No pause inside (the build stores its plan under a lock that runs take)."""
        self.off = True
        try:
            yield
        finally:
            self.off = False


class _Pending(Generic[Key]):
    """The keys of one owner queued or building, and the condition its
    waiters sleep on.  Holds nothing of the owner: the build thread finishes
    a job through it after dropping the owner."""

    __slots__ = ("keys", "cond")

    def __init__(self) -> None:
        self.keys: list[Key] = []
        self.cond = threading.Condition()

    def done(self, key: Key) -> None:
        with self.cond:
            self.keys.remove(key)
            self.cond.notify_all()


#: a queued build: the owner (weakly: a dropped session's build is skipped), its pending keys, the key
Job = tuple["weakref.ReferenceType[BackgroundBuilds[Any]]", _Pending[Any], Any]


class _Worker:
    """The process's one build thread (a daemon, started with the first
    session that builds in the background; it sleeps on a condition while no
    job is queued).  Builds of all sessions run one at a time, in order."""

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._cond:
            if self._thread is None:  # once per process (Thread.start waits for the thread to run)
                self._thread = threading.Thread(target=self._loop, name="nnrt-specialize", daemon=True)
                self._thread.start()

    def put(self, job: Job) -> None:
        self.start()
        with self._cond:
            self._jobs.append(job)
            self._cond.notify()

    def _loop(self) -> None:
        courtesy = Courtesy()
        while True:
            with self._cond:
                while not self._jobs:
                    self._cond.wait()
                owner, pending, key = self._jobs.popleft()
            self._run(owner, key, courtesy)  # returns holding nothing of the owner
            pending.done(key)

    @staticmethod
    def _run(owner: "weakref.ReferenceType[BackgroundBuilds[Any]]", key: Any, courtesy: Courtesy) -> None:
        builds = owner()
        if builds is None:  # the session is gone
            return
        courtesy.waited, courtesy.mark = 0.0, time.perf_counter()
        sys.setprofile(courtesy)  # this thread only, for the build only
        try:
            builds.build(key, courtesy)
        except BaseException:  # noqa: BLE001 - a build reports its own errors; the thread must live on
            log.exception("background build failed")
        finally:
            sys.setprofile(None)


_WORKER = _Worker()


class BackgroundBuilds(Generic[Key]):
    """The keys of one owner (a session's specializations) that
    ``build(key, courtesy)`` turns into plans on the process's build thread.
    At most ``limit`` keys are pending (queued or building).  ``build``
    stores its result itself and reports its own errors."""

    def __init__(self, build: Callable[[Key, Courtesy], None], limit: int) -> None:
        self.build = build
        self.limit = limit
        self._pending: _Pending[Key] = _Pending()
        _WORKER.start()  # now (at session build), not in the run that queues the first key

    def submit(self, key: Key) -> bool:
        """Queue ``key`` (``True``; also when it is pending already); ``False``
        when ``limit`` keys are pending."""
        p = self._pending
        with p.cond:
            if key in p.keys:
                return True
            if len(p.keys) >= self.limit:
                return False
            p.keys.append(key)
        _WORKER.put((weakref.ref(self), p, key))
        return True

    def pending(self) -> list[Key]:
        """Keys queued or building, oldest first."""
        with self._pending.cond:
            return list(self._pending.keys)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no key is pending (``True``) or ``timeout`` seconds passed (``False``)."""
        p = self._pending
        with p.cond:
            return p.cond.wait_for(lambda: not p.keys, timeout)
