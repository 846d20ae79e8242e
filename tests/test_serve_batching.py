"""The dynamic batcher's fair share (``nnrt_serve.batcher``, ``fair_share``): with several instances a
forming batch is full at ``ceil((queued + forming + running rows) / instances)`` rows.

The runs go to a gated stand-in for ``Session.run_async`` that records each execution's rows and
finishes it only when the test says, so every assertion is about which rows went together, never about
how fast anything ran.  The delay is an hour: a batch that waited it would hang the test (60 s limit)."""
from __future__ import annotations

import asyncio
import concurrent.futures

import numpy as np
import pytest

pytest.importorskip("nnrt_serve")
from nnrt_serve.batcher import BatchStats, ModelRunner  # noqa: E402
from nnrt_serve.settings import ServingSettings  # noqa: E402

HOUR_MS = 3_600_000.0


class GatedSession:
    """``run_async`` returns a future the test completes (:meth:`finish`); outputs: ``y = 2 x``."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, dict, concurrent.futures.Future]] = []

    def run_async(self, feeds, output_names=None, *, timeout=None) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.runs.append((len(feeds["x"]), feeds, fut))
        return fut

    @property
    def rows(self) -> list[int]:
        return [n for n, _, _ in self.runs]

    def finish(self, i: int) -> None:
        _, feeds, fut = self.runs[i]
        fut.set_result({"y": 2 * feeds["x"]})


def runner_of(session: GatedSession, instances: int = 2, fair_share: bool = True,
              max_batch_size: int = 16) -> tuple[ModelRunner, list[BatchStats]]:
    seen: list[BatchStats] = []
    settings = ServingSettings(max_batch_size=max_batch_size, max_queue_delay_ms=HOUR_MS, instances=instances,
                               fair_share=fair_share)
    return ModelRunner("m", session, settings, True, observe=lambda _, s: seen.append(s)), seen


def row(i: float, n: int = 1) -> dict[str, np.ndarray]:
    return {"x": np.full((n, 2), i, dtype=np.float32)}


async def settle(turns: int = 200) -> None:
    """Let the workers run until they wait (on the gate, an arrival or the delay)."""
    for _ in range(turns):
        await asyncio.sleep(0)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_a_burst_spreads_over_the_idle_instances():
    """16 requests, 2 idle instances: two batches of 8 at once (without fair_share: one of 16, the other
    instance idle)."""
    async def main(fair_share: bool):
        s = GatedSession()
        runner, _ = runner_of(s, fair_share=fair_share)
        tasks = [asyncio.ensure_future(runner.infer(row(i), None)) for i in range(16)]
        await settle()
        rows = list(s.rows)
        for i in range(len(s.runs)):
            s.finish(i)
        outs = await asyncio.gather(*tasks)
        await runner.close()
        return rows, outs
    rows, outs = run(main(True))
    assert rows == [8, 8]
    assert [float(o["y"][0, 0]) for o in outs] == [2.0 * i for i in range(16)]  # each its own rows back
    assert run(main(False))[0] == [16]


def test_the_share_counts_the_rows_running_elsewhere():
    """With 1 row running on one instance, 10 queued requests give the free one its share, 6 rows
    (ceil(11 / 2)); when the other frees while those 6 run, the 4 left are below their share
    (ceil(10 / 2) = 5), and so are 5 (ceil(11 / 2) = 6): with two instances a batch waits until it holds
    as many rows as the one running, 6 (without fair_share the first two requests would wait the hour
    for more: the test's time limit)."""
    async def main():
        s = GatedSession()
        runner, _ = runner_of(s)
        first = [asyncio.ensure_future(runner.infer(row(i), None)) for i in range(2)]
        await settle()
        assert s.rows == [1, 1]  # 2 rows, 2 idle instances: one each
        s.finish(0)
        await asyncio.gather(first[0])
        tasks = [asyncio.ensure_future(runner.infer(row(i), None)) for i in range(10)]
        await settle()
        rows = list(s.rows)
        s.finish(1)  # the other instance frees while the 6 run: the 4 left are below their share, 5
        await settle()
        below = [list(s.rows)]
        tasks.append(asyncio.ensure_future(runner.infer(row(10), None)))  # 5 rows: the share is now 6
        await settle()
        below.append(list(s.rows))
        tasks.append(asyncio.ensure_future(runner.infer(row(11), None)))  # 6 of ceil(12 / 2): met
        await settle()
        met = list(s.rows)
        for i in range(2, len(s.runs)):
            s.finish(i)
        outs = await asyncio.gather(first[1], *tasks)
        await runner.close()
        return rows, below, met, outs
    rows, below, met, outs = run(main())
    assert rows == [1, 1, 6] and below == [[1, 1, 6], [1, 1, 6]] and met == [1, 1, 6, 6]
    assert [float(o["y"][0, 0]) for o in outs] == [2.0] + [2.0 * i for i in range(12)]


def test_a_batch_below_its_share_waits_until_an_instance_frees():
    """One request arriving while 4 rows run elsewhere is below its share (ceil(5 / 2) = 3): it waits for
    more (the delay is an hour); when the other execution ends its share is 1 and it runs at once (without
    fair_share it would wait the hour: the test's time limit)."""
    async def main():
        s = GatedSession()
        runner, seen = runner_of(s)
        busy = [asyncio.ensure_future(runner.infer(row(i), None)) for i in range(8)]
        await settle()
        assert s.rows == [4, 4]
        s.finish(0)
        await asyncio.gather(*busy[:4])
        lone = asyncio.ensure_future(runner.infer(row(9), None))
        await settle()
        waiting = list(s.rows)  # still [4, 4]: the free instance holds the lone request for its share
        s.finish(1)
        await settle()
        s.finish(2)
        out = await lone
        await asyncio.gather(*busy)
        await runner.close()
        return waiting, s.rows, out, seen
    waiting, rows, out, seen = run(main())
    assert waiting == [4, 4] and rows == [4, 4, 1]
    assert float(out["y"][0, 0]) == 18.0
    assert [b.rows for b in seen] == [4, 4, 1] and all(b.ok for b in seen)


def test_one_instance_fills_its_batch_as_before():
    """A single instance has nobody to share with: it takes every queued row up to max_batch_size, and
    below that waits for more (the 4 left run when 4 more make the batch full)."""
    async def main():
        s = GatedSession()
        runner, _ = runner_of(s, instances=1, max_batch_size=8)
        tasks = [asyncio.ensure_future(runner.infer(row(i), None)) for i in range(12)]
        await settle()
        first = list(s.rows)
        s.finish(0)
        await settle()
        waiting = list(s.rows)
        tasks += [asyncio.ensure_future(runner.infer(row(i), None)) for i in range(4)]
        await settle()
        s.finish(1)
        await asyncio.gather(*tasks)
        await runner.close()
        return first, waiting, s.rows
    assert run(main()) == ([8], [8], [8, 8])


def test_a_cancelled_request_leaves_the_share():
    """A queued request whose client went away no longer counts: 4 rows queued, 2 of them cancelled, on 2
    idle instances give batches of 1 and 1, not 2 and 0."""
    async def main():
        s = GatedSession()
        runner, _ = runner_of(s)
        tasks = [asyncio.ensure_future(runner.infer(row(i), None)) for i in range(4)]
        await asyncio.sleep(0)  # all four queued, no worker has woken yet
        tasks[1].cancel()
        tasks[2].cancel()
        await settle()
        rows = list(s.rows)
        for i in range(len(s.runs)):
            s.finish(i)
        outs = await asyncio.gather(*tasks, return_exceptions=True)
        await runner.close()
        return rows, outs
    rows, outs = run(main())
    assert rows == [1, 1]
    assert float(outs[0]["y"][0, 0]) == 0.0 and float(outs[3]["y"][0, 0]) == 6.0
