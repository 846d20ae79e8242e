"""Cold-start work done on background threads: the heap prefaulted while
ONNX Runtime builds a session (nnrt_core.runtime.heap), and the fork/exit
joins of nnrt_core.background."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from nnrt_core.runtime import heap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def fresh_heap(monkeypatch):
    """The heap module as in a fresh process with a tuned allocator."""
    heap.wait_for_prefault()
    monkeypatch.setattr(heap, "_tuned", True)
    monkeypatch.setattr(heap, "_touched", 0)
    monkeypatch.setattr(heap, "_pending", None)
    return heap


def test_async_prefault_touches_on_a_thread_that_the_next_prefault_waits_for(fresh_heap):
    assert fresh_heap.prefault_heap_async(1 << 20)
    thread = fresh_heap._pending
    assert thread is not None and thread.name == "nnrt-heap-prefault"
    assert fresh_heap.prefault_heap(1 << 20)  # waits, then finds the bytes touched
    assert not thread.is_alive() and fresh_heap._pending is None
    assert fresh_heap._touched == 1 << 20


def test_async_prefault_does_nothing_untuned_or_above_the_mmap_threshold(fresh_heap, monkeypatch):
    assert not fresh_heap.prefault_heap_async(fresh_heap._MMAP_THRESHOLD)
    assert not fresh_heap.prefault_heap_async(0)
    monkeypatch.setattr(heap, "_tuned", False)
    assert not fresh_heap.prefault_heap_async(1 << 20)
    assert fresh_heap._pending is None and fresh_heap._touched == 0


def test_async_prefault_of_fewer_bytes_than_touched_starts_no_thread(fresh_heap):
    assert fresh_heap.prefault_heap(2 << 20)
    assert fresh_heap.prefault_heap_async(1 << 20) and fresh_heap._pending is None


def test_the_async_block_is_held_until_waited_for_and_then_freed(fresh_heap):
    assert fresh_heap.prefault_heap_async(1 << 20)
    assert fresh_heap._block is not None and fresh_heap._block.nbytes == 1 << 20
    fresh_heap.wait_for_prefault()
    assert fresh_heap._block is None and fresh_heap._pending is None
    fresh_heap.wait_for_prefault()  # nothing pending: a no-op


def test_background_threads_are_daemons_that_wait_all_joins():
    import threading

    from nnrt_core import background

    done: list[int] = []
    release = threading.Event()
    thread = background.start(lambda n: (release.wait(10), done.append(n)), "nnrt-test", 7)
    threading.Timer(0.05, release.set).start()
    background.wait_all()  # what a fork and the exit call first
    assert done == [7] and not thread.is_alive() and thread.daemon and thread.name == "nnrt-test"


FORK_WAITS = textwrap.dedent("""
    import os, threading
    from nnrt_core import background
    done, release = [], threading.Event()
    background.start(lambda: (release.wait(10), done.append(1)), "nnrt-test")
    threading.Timer(0.2, release.set).start()
    pid = os.fork()  # joins the background thread first: the child sees its work done
    if pid == 0:
        os._exit(0 if done else 3)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_waits_for_the_background_threads():
    out = subprocess.run([sys.executable, "-c", FORK_WAITS], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"]
