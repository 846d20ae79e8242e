"""Asynchronous runs: ``Session.run_async`` futures and ``Stream`` queues.

A ``Stream`` keeps up to ``max_in_flight`` requests of one session running at
once (like CANN streams or OpenVINO's ``AsyncInferQueue``): ``submit`` blocks
while it is full, every finished request goes to the callback in completion
order with the caller's ``userdata``; ``wait_all`` waits for all submitted.

Runs share the compiled partitions and nothing else; throughput gains need
backends that release the GIL while they compute (BLAS, ONNX Runtime).

How many of the requests in flight *execute* at once is the stream's
``concurrency``: a number, or ``"auto"`` (the default), which measures the
completion rate with all of them running and with one at a time and keeps
the faster (as OpenVINO's throughput hint picks its stream count): several
small requests side by side use cores one request cannot; a model whose
weights do not fit the caches (VGG-19) runs faster one at a time.  The choice
is remembered on the session for the next stream with the same
``max_in_flight`` and checked again now and then (the load changes).

Cancellation: ``RunFuture.cancel()`` keeps a request that has not started
from running; a running one is marked cancelled at once (``result()`` raises
``CancelledError``) and its ``RunControl`` cancelled: backends stop at their
next check (docs/async.md).  The session stays usable either way.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import CancelledError, Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import _base as _futures_base
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np

from nnrt_core.errors import ConfigError, ExecutionError
from nnrt_core.record import Record
from nnrt_core.control import RunControl, accepts_control
from nnrt_core.runtime.thread_budget import CORES, share_of_cores, use_thread_budget


class StreamTarget(Protocol):
    """What a :class:`Stream` needs of the session it drives (``Session`` is one)."""

    #: measured concurrency per ``max_in_flight``, remembered between streams
    concurrency_choices: dict[int, int]

    def run(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None, *,
            control: RunControl | None = None) -> dict[str, Any]: ...

    def validate_feeds(self, feeds: Mapping[str, Any]) -> Mapping[str, Any]: ...

    def prepare_thread_budgets(self, budgets: Iterable[int]) -> None: ...

__all__ = ["RunFuture", "Completion", "Stream", "RunPool", "ConcurrencyTuner", "default_workers"]

Outputs = dict[str, np.ndarray]


def default_workers() -> int:
    """Worker threads of a session's ``run_async`` pool: one per CPU core (at least 2)."""
    return max(2, CORES)


class RunFuture(Future):
    """The future of one asynchronous run.

    Like ``concurrent.futures.Future``, except that ``cancel()`` also succeeds
    while the run is executing: the future is cancelled immediately and so is
    the run's ``control`` (the run stops at the backends' next check)."""

    def __init__(self, control: RunControl | None = None) -> None:
        super().__init__()
        self.cancel_requested_while_running = False
        #: the run's deadline and cancellation (``None`` for futures not made by a RunPool)
        self.control = control

    def cancel(self) -> bool:
        running = False
        with self._condition:
            if self._state == _futures_base.RUNNING:
                # back to PENDING so that Future.cancel() moves it to CANCELLED,
                # wakes result() and runs the done-callbacks (outside this lock);
                # a result arriving in between wins and cancel() returns False
                running = True
                self._state = _futures_base.PENDING
        cancelled = super().cancel()
        if running and cancelled:
            self.cancel_requested_while_running = True
            if self.control is not None:
                self.control.cancel()  # the worker stops at its next check
            # tell concurrent.futures.wait / as_completed, as for a queued cancel
            self.set_running_or_notify_cancel()
        return cancelled

    def settle(self, result: Any = None, error: BaseException | None = None) -> bool:
        """Deliver the run's outcome; ``False`` when the future was cancelled
        meanwhile (the outcome is dropped)."""
        try:
            if error is not None:
                self.set_exception(error)
            else:
                self.set_result(result)
        except InvalidStateError:
            return False
        return True


class RunPool:
    """Worker threads running requests of one session.

    The threads belong to a ``ThreadPoolExecutor`` (they exit when the pool is
    shut down or garbage-collected); each request has its own ``RunFuture``."""

    def __init__(self, run: Callable[..., Outputs], workers: int, name: str = "nnrt-run") -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ConfigError(f"the number of worker threads must be a positive integer, got {workers!r}")
        self._run = run
        self._takes_control = accepts_control(run)  # run(feeds, names, control=...): cancel stops it
        self.workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._active = 0
        self._active_lock = threading.Lock()

    def submit(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None = None,
               on_done: Callable[[RunFuture, float], None] | None = None,
               timeout: float | None = None) -> RunFuture:
        """Queue one run; ``on_done(future, seconds)`` is called on the worker
        after the future is settled (also when it was cancelled).  ``timeout``
        (seconds from now) is the run's deadline."""
        fut = RunFuture(RunControl(timeout))
        try:
            self._executor.submit(self._work, fut, feeds, output_names, on_done)
        except RuntimeError as e:  # shut down
            fut.set_exception(ExecutionError(f"cannot submit a run: {e}"))
            if on_done is not None:
                on_done(fut, 0.0)
        return fut

    def _work(self, fut: RunFuture, feeds: Mapping[str, Any], output_names: Sequence[str] | None,
              on_done: Callable[[RunFuture, float], None] | None) -> None:
        t0 = time.perf_counter()
        if fut.set_running_or_notify_cancel():
            with self._active_lock:
                self._active += 1
                active = self._active
            try:
                # the run's share of the cores, from the runs active as it starts
                with use_thread_budget(share_of_cores(active)):
                    result = self._run(feeds, output_names, control=fut.control) if self._takes_control \
                        else self._run(feeds, output_names)
            except BaseException as e:  # delivered through the future, never lost
                fut.settle(error=e)
            else:
                fut.settle(result)
            finally:
                with self._active_lock:
                    self._active -= 1
        if on_done is not None:
            on_done(fut, time.perf_counter() - t0)

    def shutdown(self, wait: bool = True) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=False)


class ConcurrencyTuner:
    """Chooses how many requests execute at once, by measurement.

    Under load (the stream is full), it measures the completion rate over
    ``window`` completions (and at least ``min_seconds``) with ``high``
    requests executing, with one per
    core (``cores``, when fewer than ``high``) and with 1, keeps the fastest
    (the most concurrent of those within ``margin`` of it), and measures
    again after ``recheck`` completions.  A window is restarted whenever the
    stream runs dry, so idle gaps are never counted."""

    def __init__(self, high: int, window: int | None = None, recheck: int = 256, margin: float = 0.03,
                 start: int | None = None, cores: int | None = None, min_seconds: float = 0.1) -> None:
        self.high = high
        cores = cores if cores is not None else CORES
        self.levels = sorted({high, max(1, min(cores, high)), 1}, reverse=True)  #: concurrencies tried
        self.window = window or max(4, 2 * high)
        #: a window also lasts at least this long (a few ms of a small model are noise)
        self.min_seconds = min_seconds
        self.recheck = recheck
        self.margin = margin
        self.limit = start if start in self.levels else high
        self.chosen: int | None = start if start in self.levels else None
        self.rates: dict[int, float] = {}
        self._plan: list[int] = [] if self.chosen is not None else self._fresh_plan()
        self._since_choice = 0
        self._window_start: float | None = None
        self._count = 0

    def _fresh_plan(self) -> list[int]:
        """The current level first (no switch to start with), then the others."""
        return [self.limit] + [c for c in self.levels if c != self.limit]

    def completed(self, now: float, saturated: bool) -> None:
        """One request finished at ``now``; ``saturated``: the stream was full."""
        if not self._plan:
            self._since_choice += 1
            if self._since_choice >= self.recheck and self.high > 1:
                self._since_choice = 0
                self.rates = {}
                self._plan = self._fresh_plan()
                self._restart(now)
            return
        if not saturated:
            self._window_start = None  # ran dry: idle time must not count
            return
        if self._window_start is None:
            self._restart(now)
            return
        self._count += 1
        if self._count < self.window or now - self._window_start < self.min_seconds:
            return
        self.rates[self.limit] = self._count / max(now - self._window_start, 1e-9)
        self._plan.pop(0)
        if self._plan:
            self.limit = self._plan[0]
            self._window_start = None  # the first completion after a switch only starts the window
            return
        top = max(self.rates.values())
        best = max(c for c, r in self.rates.items() if r >= top * (1 - self.margin))
        self.limit = self.chosen = best

    def _restart(self, now: float) -> None:
        self._window_start = now
        self._count = 0


class Completion(Record):
    """One finished request of a ``Stream``, as handed to its callback."""

    __slots__ = ("index", "userdata", "outputs", "error", "seconds")
    index: int  #: submission order, from 0
    userdata: Any
    outputs: Outputs | None  #: None when the run failed or was cancelled
    error: BaseException | None
    seconds: float  #: time the request spent on its worker (0 when cancelled before starting)

    def __init__(self, index: int, userdata: Any, outputs: Outputs | None, error: BaseException | None,
                 seconds: float) -> None:
        self.index, self.userdata, self.outputs, self.error, self.seconds = index, userdata, outputs, error, seconds

    @property
    def ok(self) -> bool:
        return self.error is None


class Stream:
    """Keeps up to ``max_in_flight`` runs of ``session`` going at once.

    >>> with session.stream(max_in_flight=3, callback=lambda c: print(c.index, c.ok)) as s:
    ...     for i, x in enumerate(batches):
    ...         s.submit({"x": x}, userdata=i)
    ...     s.wait_all()

    ``callback(completion)`` runs on a worker thread in completion order (one at
    a time); it may ``submit`` more requests but not ``wait_all``/``close``.
    A run's error reaches the callback as ``completion.error`` and its future;
    an exception raised by the callback itself is re-raised by ``wait_all``.
    Without a callback, ``wait_all`` returns the completions.
    """

    def __init__(self, session: StreamTarget, max_in_flight: int = 2,
                 callback: Callable[[Completion], Any] | None = None,
                 output_names: Sequence[str] | None = None, concurrency: int | str = "auto") -> None:
        if not isinstance(max_in_flight, int) or isinstance(max_in_flight, bool) or max_in_flight < 1:
            raise ConfigError(f"max_in_flight must be a positive integer, got {max_in_flight!r}")
        if callback is not None and not callable(callback):
            raise ConfigError(f"callback must be callable, got {type(callback).__name__}")
        if concurrency != "auto" and (not isinstance(concurrency, int) or isinstance(concurrency, bool)
                                      or not 1 <= concurrency <= max_in_flight):
            raise ConfigError(f"concurrency must be 'auto' or an integer from 1 to max_in_flight "
                              f"({max_in_flight}), got {concurrency!r}")
        self.session = session
        self._takes_control = accepts_control(session.run)
        self.max_in_flight = max_in_flight
        self.callback = callback
        self.output_names = list(output_names) if output_names is not None else None
        self.tuner: ConcurrencyTuner | None = None
        if concurrency == "auto" and max_in_flight > 1:
            self.tuner = ConcurrencyTuner(max_in_flight, start=session.concurrency_choices.get(max_in_flight))
        self._fixed_limit = max_in_flight if concurrency == "auto" else int(concurrency)
        levels = self.tuner.levels if self.tuner is not None else [self._fixed_limit]
        session.prepare_thread_budgets({share_of_cores(k) for k in levels})
        self._gate = threading.Condition()
        self._executing = 0
        self._pool = RunPool(self._gated_run, max_in_flight, name="nnrt-stream")
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._cond = threading.Condition()
        self._callback_lock = threading.Lock()
        self._pending: set[RunFuture] = set()
        self._done: deque[Completion] = deque()
        self._callback_errors: list[BaseException] = []
        self._submitted = 0
        self._completed = 0
        self._closed = False

    @property
    def concurrency(self) -> int:
        """How many requests may execute at once right now."""
        return self.tuner.limit if self.tuner is not None else self._fixed_limit

    def _gated_run(self, feeds: Mapping[str, Any], output_names: Sequence[str] | None, control: Any = None) -> Outputs:
        with self._gate:
            while self._executing >= self.concurrency:
                self._gate.wait()
            self._executing += 1
            width = self.concurrency
        try:
            # each executing request gets its share of the cores (see nnrt_core.runtime.thread_budget)
            with use_thread_budget(share_of_cores(width)):
                kw = {"control": control} if control is not None and self._takes_control else {}
                return self.session.run(feeds, output_names, **kw)
        finally:
            with self._gate:
                self._executing -= 1
                if self.tuner is not None:
                    before = self.tuner.chosen
                    # saturated: every slot was taken, the producer keeps up (an int read, no lock needed)
                    self.tuner.completed(time.perf_counter(),
                                         saturated=self._submitted - self._completed >= self.max_in_flight)
                    if self.tuner.chosen is not None and self.tuner.chosen != before:
                        self.session.concurrency_choices[self.max_in_flight] = self.tuner.chosen
                self._gate.notify_all()

    # ----------------------------------------------------------- requests
    def submit(self, feeds: Mapping[str, Any], userdata: Any = None, timeout: float | None = None) -> RunFuture:
        """Start a run, blocking while ``max_in_flight`` runs are in flight.

        Feeds are validated here: bad feeds raise ``InputError`` in the caller
        and use no slot.  The arrays must stay unchanged until the run ends.
        ``timeout`` (seconds from now) is the run's deadline."""
        if self._closed:
            raise ExecutionError("stream is closed")
        checked = self.session.validate_feeds(feeds)
        checked = dict(checked)  # the caller may reuse its dict
        self._slots.acquire()
        with self._cond:
            index = self._submitted
            self._submitted += 1

        def done(fut: RunFuture, seconds: float) -> None:
            self._finish(fut, index, userdata, seconds)

        fut = self._pool.submit(checked, self.output_names, on_done=done, timeout=timeout)
        with self._cond:
            self._pending.add(fut)
        fut.add_done_callback(self._forget)  # runs at once when already done
        return fut

    def _forget(self, fut: Future) -> None:
        with self._cond:
            self._pending.discard(fut)  # type: ignore[arg-type]

    def _finish(self, fut: RunFuture, index: int, userdata: Any, seconds: float) -> None:
        if fut.cancelled():
            c = Completion(index, userdata, None, CancelledError(f"request {index} was cancelled"),
                           seconds if fut.cancel_requested_while_running else 0.0)
        else:
            err = fut.exception()
            c = Completion(index, userdata, None if err is not None else fut.result(), err, seconds)
        # the slot is free before the callback runs, so a callback may submit
        self._slots.release()
        try:
            if self.callback is not None:
                with self._callback_lock:  # one callback at a time, in completion order
                    try:
                        self.callback(c)
                    except BaseException as e:
                        with self._cond:
                            self._callback_errors.append(e)
            else:
                with self._cond:
                    self._done.append(c)
        finally:
            with self._cond:
                self._completed += 1
                self._cond.notify_all()

    # ------------------------------------------------------------ waiting
    @property
    def in_flight(self) -> int:
        """Requests submitted and not yet completed (callback included)."""
        with self._cond:
            return self._submitted - self._completed

    @property
    def submitted(self) -> int:
        return self._submitted

    @property
    def completed(self) -> int:
        return self._completed

    def wait_all(self, timeout: float | None = None) -> list[Completion]:
        """Wait until every submitted request has completed (and its callback
        returned).  Returns the completions not yet returned when the stream
        has no callback; raises ``ExecutionError`` carrying the first exception
        a callback raised, and ``TimeoutError`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._completed < self._submitted:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"{self._submitted - self._completed} request(s) still in flight "
                                       f"after {timeout} s")
                self._cond.wait(left)
            done = list(self._done)
            self._done.clear()
            errors, self._callback_errors = self._callback_errors, []
        if errors:
            first = errors[0]
            raise ExecutionError(f"stream callback raised {type(first).__name__}: {first}"
                                 + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")) from first
        return done

    def cancel_pending(self) -> int:
        """Cancel every request not yet finished; returns how many were cancelled."""
        with self._cond:
            pending = list(self._pending)
        return sum(1 for f in pending if f.cancel())

    def close(self) -> None:
        """Wait for the requests in flight and stop the worker threads."""
        if self._closed:
            return
        try:
            self.wait_all()
        finally:
            self._closed = True
            self._pool.shutdown(wait=True)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.cancel_pending()
            self._closed = True
            self._pool.shutdown(wait=True)
        else:
            self.close()

    def __repr__(self) -> str:
        return (f"<Stream max_in_flight={self.max_in_flight} concurrency={self.concurrency} "
                f"submitted={self._submitted} completed={self._completed}>")
