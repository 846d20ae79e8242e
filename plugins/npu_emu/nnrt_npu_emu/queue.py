"""A per-device command queue: a worker thread runs submitted jobs in order,
the host waits on completion events (futures), like a real driver.  A job
whose run was cancelled or passed its deadline while it waited is dropped
with the run's error instead of running.  A synchronous call on an idle
queue runs in the calling thread (the device is taken for it like for any
job): the same order, without two thread hand-offs per run, which a busy
host schedules late."""
from __future__ import annotations

import itertools
import queue as _queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from nnrt_core.plugin_api import RunControl

__all__ = ["CommandQueue"]


class CommandQueue:
    """FIFO of jobs executed by one daemon worker thread."""

    _ids = itertools.count()

    def __init__(self, name: str) -> None:
        self.name = name
        self._q: _queue.SimpleQueue = _queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._device = threading.Lock()  #: held by whichever thread runs a job
        self.submitted = 0
        self.completed = 0

    def _ensure_worker(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._loop, name=f"npu-queue-{self.name}-{next(self._ids)}",
                                                    daemon=True)
                    self._thread.start()

    def submit(self, job: Callable[[], Any], control: RunControl | None = None) -> "Future[Any]":
        """Enqueue ``job``; its result or exception arrives through the future.
        A stopped ``control`` (cancelled, past its deadline) drops the job if
        it has not started."""
        fut: Future[Any] = Future()
        self._ensure_worker()
        with self._lock:
            self.submitted += 1
        self._q.put((job, fut, control if control is not None and control.watched else None))
        return fut

    def call(self, job: Callable[[], Any], control: RunControl | None = None) -> Any:
        """``submit(job, control).result()``: run now in the calling thread
        when no job is queued or running, else queue behind them and wait."""
        with self._lock:
            idle = self.submitted == self.completed and self._device.acquire(blocking=False)
            if idle:
                self.submitted += 1
        if not idle:
            return self.submit(job, control).result()
        try:
            return job()
        finally:
            with self._lock:
                self.completed += 1
            self._device.release()

    def _loop(self) -> None:
        while True:
            job, fut, control = self._q.get()
            if fut.set_running_or_notify_cancel():
                try:
                    if control is not None and control.stopped():
                        raise control.error(f"the command queue of {self.name} (the job never started)")
                    with self._device:
                        fut.set_result(job())
                except BaseException as e:  # delivered to the waiting host thread
                    fut.set_exception(e)
                finally:
                    with self._lock:
                        self.completed += 1
            # a finished job must not keep its partition and tensors (device memory) alive while idle
            del job, fut, control

    @property
    def on_worker(self) -> bool:
        return threading.current_thread() is self._thread
