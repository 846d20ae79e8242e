"""Run control: the deadline, cancellation and memory budget of one run.

A :class:`RunControl` travels with a run through the executor and the backend
contract (``CompiledPartition.run(inputs, control)``).  Backends check it
cooperatively (``stopped()`` between nodes) and may ask to be told when it
stops (``on_stop(callback)``: ONNX Runtime sets ``RunOptions.terminate``).
While a partition built on ``CompiledPartition._run`` runs, the control is
also the calling thread's :func:`current_control`, so kernels deep inside
(Loop bodies, size checks) find it without new parameters.

A watchdog thread fires the ``on_stop`` callbacks of controls whose deadline
passes; it is started on first use and only watches controls with callbacks.
"""
from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from types import FunctionType
from typing import Callable
from weakref import WeakKeyDictionary

from nnrt_core.errors import ConfigError, ExecutionError, RunCancelledError, RunTimeoutError

__all__ = ["RunControl", "DEFAULT_MAX_TENSOR_BYTES", "current_control", "enter", "leave", "enter_control",
           "leave_control", "tensor_limit",
           "accepts_control", "for_run", "watched_deadlines"]

#: the default size limit of one tensor (``NNRT_MAX_TENSOR_BYTES``, 8 GiB when unset)
DEFAULT_MAX_TENSOR_BYTES = int(os.environ.get("NNRT_MAX_TENSOR_BYTES", 8 << 30))

#: function -> whether it takes ``control`` (:func:`accepts_control`); weak: classes made at run time may go
_ACCEPTS: "WeakKeyDictionary[FunctionType, bool]" = WeakKeyDictionary()

_monotonic = time.monotonic
_local = threading.local()


class RunControl:
    """Deadline, cancellation flag and memory budget of a run.

    ``timeout`` (seconds from now) sets the deadline; ``max_tensor_bytes``
    caps every tensor the run computes (``None``: the session's budget).
    ``quiet``: a run expected to fail now and then (measured selection runs
    candidate plans on synthetic inputs): backends keep their engines' own
    error logging off for it (ONNX Runtime: ``RunOptions.log_severity_level``
    4); the failure is still raised.  ``cancel()`` may be called from any thread."""

    __slots__ = ("timeout", "deadline", "max_tensor_bytes", "quiet", "watched", "_stop", "_callbacks", "_lock")

    def __init__(self, timeout: float | None = None, max_tensor_bytes: int | None = None,
                 quiet: bool = False) -> None:
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout >= 0):
            raise ConfigError(f"timeout must be a non-negative number of seconds or None, got {timeout!r}")
        if max_tensor_bytes is not None and (isinstance(max_tensor_bytes, bool) or not isinstance(
                max_tensor_bytes, int) or max_tensor_bytes < 1):
            raise ConfigError(f"max_tensor_bytes must be a positive integer or None, got {max_tensor_bytes!r}")
        if not isinstance(quiet, bool):
            raise ConfigError(f"quiet must be true or false, got {quiet!r}")
        self.timeout = timeout
        self.quiet = quiet
        self.deadline = None if timeout is None else _monotonic() + timeout
        self.max_tensor_bytes = max_tensor_bytes
        #: False for a control that can never stop (no deadline, never cancelled): not checked per node
        self.watched = True
        self._stop: str | None = None  # "cancelled" once cancelled
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @classmethod
    def budget_only(cls, max_tensor_bytes: int | None) -> "RunControl":
        """A control that only carries a memory budget (a session's default)."""
        c = cls(None, max_tensor_bytes)
        c.watched = False
        return c

    # ----------------------------------------------------------- state
    def stopped(self) -> bool:
        """True once cancelled or past the deadline (cheap: checked per node)."""
        return self._stop is not None or (self.deadline is not None and _monotonic() >= self.deadline)

    @property
    def cancelled(self) -> bool:
        return self._stop == "cancelled"

    def remaining(self) -> float | None:
        """Seconds left before the deadline (``None`` without one)."""
        return None if self.deadline is None else self.deadline - _monotonic()

    def cancel(self) -> bool:
        """Stop the run: backends stop at their next check.  ``False`` when
        it was already cancelled."""
        if not self.watched:
            raise ExecutionError("this run control only carries a memory budget and cannot be cancelled")
        with self._lock:
            if self._stop is not None:
                return False
            self._stop = "cancelled"
            callbacks, self._callbacks = self._callbacks, []
        _fire(callbacks)
        return True

    def error(self, where: str) -> ExecutionError:
        """The error of a run stopped in ``where`` (e.g. "node 'x' (Loop)")."""
        if self.cancelled:
            return RunCancelledError(f"run cancelled; stopped in {where}")
        return RunTimeoutError(f"run passed its deadline ({self.timeout} s timeout); stopped in {where}")

    def check(self, where: Callable[[], str]) -> None:
        """Raise :meth:`error` (``where()`` names the place) once stopped."""
        if self.watched and self.stopped():
            raise self.error(where())

    # ------------------------------------------------------- callbacks
    def on_stop(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` (from another thread) when this run is cancelled
        or its deadline passes; at once when already stopped.  Returns a
        function that unregisters it (call it when the guarded work is done)."""
        if not self.watched:
            return _nothing
        with self._lock:
            stopped = self.stopped()
            if not stopped:
                self._callbacks.append(callback)
        if stopped:
            callback()
            return _nothing
        if self.deadline is not None:
            _WATCHDOG.watch(self)

        def remove() -> None:
            with self._lock:
                try:
                    self._callbacks.remove(callback)
                except ValueError:
                    pass
        return remove

    def _expire(self) -> None:
        """The watchdog's call once the deadline has passed."""
        with self._lock:
            callbacks, self._callbacks = self._callbacks, []
        _fire(callbacks)

    def __repr__(self) -> str:
        state = self._stop or ("expired" if self.stopped() else "running")
        return f"<RunControl {state} timeout={self.timeout} max_tensor_bytes={self.max_tensor_bytes}>"


def _nothing() -> None:
    return None


def _fire(callbacks: list[Callable[[], None]]) -> None:
    for cb in callbacks:
        try:
            cb()
        except Exception:  # a failing stop hook must not hide the stop itself
            pass


class _Watchdog:
    """One daemon thread firing the stop callbacks of expired controls."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, RunControl]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._live = 0  # entries kept by the last compaction

    def watch(self, control: RunControl) -> None:
        with self._cond:
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (control.deadline, next(self._seq), control))  # type: ignore[arg-type]
            if len(self._heap) > 256 and len(self._heap) > 2 * self._live:
                # finished runs (no callbacks left) wait for far deadlines: drop them
                self._heap = [e for e in self._heap if e[2]._callbacks]
                heapq.heapify(self._heap)
                self._live = len(self._heap)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="nnrt-deadlines", daemon=True)
                self._thread.start()
            if earliest is None or control.deadline < earliest:  # type: ignore[operator]
                self._cond.notify()  # the watchdog sleeps until the earliest deadline: wake it only for a new one

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > _monotonic():
                    self._cond.wait(None if not self._heap else self._heap[0][0] - _monotonic())
                _, _, control = heapq.heappop(self._heap)
            control._expire()


_WATCHDOG = _Watchdog()


def watched_deadlines() -> int:
    """How many deadlines the watchdog holds (finished runs' are dropped in batches)."""
    with _WATCHDOG._cond:
        return len(_WATCHDOG._heap)


# ------------------------------------------------------- the thread's control
def current_control() -> RunControl | None:
    """The control of the partition run on this thread (``None`` outside runs)."""
    return getattr(_local, "control", None)


def enter(control: RunControl | None) -> RunControl | None:
    """Make ``control`` this thread's current one; returns the previous one for :func:`leave`."""
    prev = getattr(_local, "control", None)
    _local.control = control
    return prev


def leave(previous: RunControl | None) -> None:
    _local.control = previous


def tensor_limit() -> int:
    """The byte limit of one computed tensor on this thread: the current
    run's budget, else ``NNRT_MAX_TENSOR_BYTES``."""
    c = getattr(_local, "control", None)
    limit = c.max_tensor_bytes if c is not None else None
    return DEFAULT_MAX_TENSOR_BYTES if limit is None else limit


def accepts_control(method: Callable[..., object]) -> bool:
    """True when ``method`` (a partition's ``run`` or ``run_async``) takes a
    ``control`` argument; third-party partitions written before it do not.
    The answer is remembered per function (a bound method's ``__func__``):
    ``inspect.signature`` costs ~10 µs and every session build asks it twice
    per partition."""
    func = getattr(method, "__func__", method)
    if not isinstance(func, FunctionType):  # a callable object, a builtin: asked each time
        return _takes_control(method)
    got = _ACCEPTS.get(func)
    if got is None:
        got = _ACCEPTS[func] = _takes_control(method)
    return got


def _takes_control(method: Callable[..., object]) -> bool:
    import inspect

    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "control" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def for_run(default: RunControl, timeout: float | None, control: RunControl | None) -> RunControl | None:
    """The control of one run: ``control`` (taking ``default``'s budget when
    it has none), else a new one with ``timeout``, else ``default`` (``None``
    when that carries nothing: runs then take the fast path of no control)."""
    if control is None:
        if timeout is None:
            return default if default.max_tensor_bytes is not None else None
        return RunControl(timeout, default.max_tensor_bytes)
    if not isinstance(control, RunControl):
        raise ConfigError(f"control must be a RunControl, got {type(control).__name__}")
    if timeout is not None:
        raise ConfigError("give a run either timeout= or control= (a RunControl has its own timeout), not both")
    if control.max_tensor_bytes is None:
        control.max_tensor_bytes = default.max_tensor_bytes
    return control


#: the plugin surface's names for :func:`enter` / :func:`leave` (nnrt_core.plugin_api)
enter_control, leave_control = enter, leave
