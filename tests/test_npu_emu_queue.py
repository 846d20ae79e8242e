"""The emulated NPU's command queue: a synchronous call on an idle queue runs
in the calling thread; behind queued jobs it waits its turn (FIFO, one job at
a time on the device)."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("nnrt_npu_emu")

from nnrt_npu_emu.queue import CommandQueue  # noqa: E402


def test_call_on_an_idle_queue_runs_in_the_calling_thread():
    q = CommandQueue("t")
    assert q.call(threading.get_ident) == threading.get_ident()
    assert q.submitted == q.completed == 1
    with pytest.raises(ZeroDivisionError):
        q.call(lambda: 1 / 0)
    assert q.submitted == q.completed == 2
    assert q.submit(threading.get_ident).result() != threading.get_ident()  # async jobs: the worker


def test_call_behind_queued_jobs_waits_its_turn_and_jobs_never_overlap():
    q = CommandQueue("t")
    gate, order, running = threading.Event(), [], []

    def job(name, wait=False):
        def run():
            running.append(name)
            assert len(running) == 1, running  # one job at a time on the device
            if wait:
                gate.wait(5)
            order.append(name)
            running.remove(name)
            return threading.get_ident()
        return run

    first = q.submit(job("first", wait=True))
    second = q.submit(job("second"))
    result: list[int] = []
    caller = threading.Thread(target=lambda: result.append(q.call(job("sync"))))
    caller.start()
    caller.join(0.2)
    assert caller.is_alive() and order == []  # queued behind the running job
    gate.set()
    caller.join(5)
    assert order == ["first", "second", "sync"]
    assert first.result() == second.result() == result[0]  # the worker ran the queued call too
    assert q.submitted == q.completed == 3
