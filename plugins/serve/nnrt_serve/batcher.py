"""Per-model request queues with dynamic batching (asyncio).

Requests queue per model (bounded: one more than ``max_queue_size`` is
refused with :class:`Unavailable`).  ``instances`` workers each take the
oldest request and, when the model batches, the requests behind it with the
same per-row shapes, until ``max_batch_size`` rows or until the first has
waited ``max_queue_delay_ms``; the stacked feeds run as one
``Session.run_async`` and the outputs are split back by rows.  One batch
forms at a time (the worker forming it holds :attr:`ModelRunner.forming`),
and a worker that finds a full batch waiting takes it at once.

With several instances and ``fair_share`` (the default) a batch is full at
its *share* of the rows in the server, ``ceil((queued + forming + running
rows) / instances)`` (at most ``max_batch_size``), recomputed as requests
arrive and executions end: it runs as soon as it holds its share, so the
rows spread over all instances (16 requests and 2 idle instances: two
batches of 8 at once, not one of 16 and an idle instance), and while a
batch is below its share it waits for more, at most the delay, in step with
the other instances' work.

A request whose deadline passes, or whose client goes away (its waiting
task is cancelled), gets its answer at once; it is dropped from the queue
before it runs, and when every request of a running execution is gone the
run itself is cancelled (``RunFuture.cancel`` stops it)."""
from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from nnrt_core import Session
from nnrt_serve.errors import BadRequest, DeadlineExceeded, InternalError, Unavailable, as_serve_error
from nnrt_serve.settings import ServingSettings

__all__ = ["ModelRunner", "BatchStats"]


@dataclass
class _Pending:
    feeds: dict[str, np.ndarray]
    rows: int
    signature: tuple
    deadline: float | None
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


@dataclass
class BatchStats:
    """What one execution did, for the metrics."""

    rows: int
    requests: int
    queue_seconds: list[float]
    compute_seconds: float
    ok: bool


class ModelRunner:
    """The queue and workers of one model's session on the running event loop."""

    def __init__(self, name: str, session: Session, settings: ServingSettings, batching: bool,
                 observe: Callable[[str, BatchStats], None] | None = None) -> None:
        self.name, self.session, self.settings = name, session, settings
        self.batching = batching
        self.observe = observe
        self.queue: deque[_Pending] = deque()
        self.arrived = asyncio.Event()
        #: held by the worker forming a batch: one batch forms at a time, so two idle
        #: workers never split the arrivals between two partial batches
        self.forming = asyncio.Lock()
        self.executions = 0
        #: rows of the executions running now (the fair share counts them)
        self.running_rows = 0
        self._workers = [asyncio.create_task(self._work(), name=f"nnrt-serve:{name}:{i}")
                         for i in range(settings.instances)]

    async def infer(self, feeds: dict[str, np.ndarray], deadline: float | None) -> dict[str, np.ndarray]:
        """The outputs of ``feeds`` (already checked against the model); ``deadline``: ``time.perf_counter()`` value."""
        if len(self.queue) >= self.settings.max_queue_size:
            raise Unavailable(f"model {self.name!r}: the queue is full ({len(self.queue)} requests waiting, "
                              f"max_queue_size={self.settings.max_queue_size}); retry later")
        rows, signature = self._rows(feeds)
        pending = _Pending(feeds, rows, signature, deadline, asyncio.get_running_loop().create_future())
        self.queue.append(pending)
        self.arrived.set()
        timeout = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
        try:
            return await asyncio.wait_for(pending.future, timeout)
        except TimeoutError:
            raise DeadlineExceeded(f"model {self.name!r}: the request's deadline passed "
                                   f"({'queued' if pending in self.queue else 'running'})") from None

    def _rows(self, feeds: dict[str, np.ndarray]) -> tuple[int, tuple]:
        if not self.batching:
            return 1, ()
        rows = {a.shape[0] for a in feeds.values()}
        if len(rows) != 1:
            raise BadRequest(f"model {self.name!r}: inputs disagree on the batch (first) dimension: "
                             f"{ {k: a.shape[0] for k, a in feeds.items()} }")
        n = rows.pop()
        if n > self.settings.max_batch_size:
            raise BadRequest(f"model {self.name!r}: batch of {n} rows is over max_batch_size="
                             f"{self.settings.max_batch_size}")
        return n, tuple(sorted((k, a.shape[1:]) for k, a in feeds.items()))

    # ------------------------------------------------------------ workers
    async def _work(self) -> None:
        while True:
            async with self.forming:
                batch = await self._next_batch()
            if not batch:
                continue
            try:
                await self._execute(batch)
            except Exception as e:  # never a dead worker: the batch gets the error as its answer
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(as_serve_error(e))

    def _drop_dead_head(self) -> bool:
        """Remove the oldest request when its client is gone or its deadline passed (answering it)."""
        p = self.queue[0]
        if p.future.done():
            self.queue.popleft()
            return True
        if p.deadline is not None and time.perf_counter() >= p.deadline:
            self.queue.popleft()
            p.future.set_exception(DeadlineExceeded(f"model {self.name!r}: the request's deadline passed "
                                                    "while it was queued"))
            return True
        return False

    def _pop_live(self) -> _Pending | None:
        """The oldest request still waiting."""
        while self.queue:
            if not self._drop_dead_head():
                return self.queue.popleft()
        return None

    async def _next_batch(self) -> list[_Pending]:
        while not self.queue:
            self.arrived.clear()
            await self.arrived.wait()
        first = self._pop_live()
        if first is None:
            return []
        batch, rows = [first], first.rows
        if not self.batching:
            return batch
        until = first.enqueued + self.settings.max_queue_delay_ms / 1000.0
        while rows < self.batch_limit(rows):
            if self.queue:
                if self._drop_dead_head():
                    continue
                nxt = self.queue[0]
                if nxt.signature != first.signature or rows + nxt.rows > self.settings.max_batch_size:
                    break
                batch.append(self.queue.popleft())
                rows += nxt.rows
                continue
            left = until - time.perf_counter()
            if left <= 0:
                break
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except TimeoutError:
                break
        return batch

    def batch_limit(self, forming_rows: int) -> int:
        """The rows at which the batch now forming (``forming_rows`` so far) is full: ``max_batch_size``,
        or with ``fair_share`` and several instances its share of the rows queued, forming and running."""
        limit = self.settings.max_batch_size
        instances = self.settings.instances
        if not self.settings.fair_share or instances == 1:
            return limit
        outstanding = forming_rows + self.running_rows + sum(p.rows for p in self.queue if not p.future.done())
        return max(1, min(limit, math.ceil(outstanding / instances)))

    async def _execute(self, batch: list[_Pending]) -> None:
        rows = sum(p.rows for p in batch)
        self.running_rows += rows
        try:
            await self._run_batch(batch, rows)
        finally:
            self.running_rows -= rows
            self.arrived.set()  # a forming batch's share changes when an execution ends

    async def _run_batch(self, batch: list[_Pending], rows: int) -> None:
        start = time.perf_counter()
        feeds = batch[0].feeds if len(batch) == 1 else {
            k: np.concatenate([p.feeds[k] for p in batch]) for k in batch[0].feeds}
        deadlines = [p.deadline for p in batch]
        timeout = None if None in deadlines else max(max(deadlines) - start, 1e-3)
        run = self.session.run_async(feeds, timeout=timeout)
        waiting = asyncio.wrap_future(run)
        while not waiting.done():
            members = [p.future for p in batch if not p.future.done()]
            if not members:  # every client went away or timed out: stop the run
                run.cancel()
                break
            await asyncio.wait([waiting, *members], return_when=asyncio.FIRST_COMPLETED)
        compute = time.perf_counter() - start
        self.executions += 1
        ok = self._deliver(batch, waiting)
        if self.observe is not None:
            self.observe(self.name, BatchStats(rows, len(batch),
                                               [start - p.enqueued for p in batch], compute, ok))

    def _deliver(self, batch: list[_Pending], waiting: asyncio.Future) -> bool:
        if not waiting.done():  # cancelled because nobody waits any more
            waiting.cancel()
            return False
        if waiting.cancelled():
            return False
        error = waiting.exception()
        if error is None:
            try:
                parts = self._split(batch, waiting.result())
            except InternalError as e:
                error = e
        for i, p in enumerate(batch):
            if p.future.done():
                continue
            if error is not None:
                p.future.set_exception(as_serve_error(error))
            else:
                p.future.set_result(parts[i])
        return error is None

    def _split(self, batch: list[_Pending], outputs: dict[str, Any]) -> list[dict[str, Any]]:
        if len(batch) == 1:
            return [outputs]
        total = sum(p.rows for p in batch)
        for k, v in outputs.items():
            if np.ndim(v) == 0 or np.shape(v)[0] != total:
                raise InternalError(f"model {self.name!r}: output {k!r} has shape {list(np.shape(v))}, not "
                                    f"{total} rows: its leading dimension is not the batch")
        parts, start = [], 0
        for p in batch:
            parts.append({k: v[start:start + p.rows] for k, v in outputs.items()})
            start += p.rows
        return parts

    async def close(self) -> None:
        for w in self._workers:
            w.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        for p in self.queue:
            if not p.future.done():
                p.future.set_exception(Unavailable(f"model {self.name!r}: the server is stopping"))
        self.queue.clear()
