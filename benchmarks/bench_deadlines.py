"""Run deadlines and cancellation: how fast a stopped run lets go, and what a deadline costs.

    python benchmarks/bench_deadlines.py [--trials 7] [--rounds 15] [--models squeezenet,inception_v1]
                                         [--backends numpy,onnxruntime] [--json]

1. **Stop latency** (median of ``--trials``), on a ``Loop`` of 2**62 trips
   (one Add per iteration), per backend:

   * *cancel*: the run goes on a thread of its own with a ``RunControl``;
     after 0.2 s the main thread calls ``control.cancel()``.  Reported: the
     time from ``cancel()`` to the run's thread returning (the worker is
     free), and that thread's CPU time from ``cancel()`` until 0.3 s later
     (``time.pthread_getcpuclockid``; the thread stays alive, idle, after the
     run returns so its clock can be read);
   * *deadline*: ``Session.run(timeout=0.2)``; reported: the time from the
     deadline to ``run`` returning;
   * *pool*: every worker of ``Session.run_async``'s pool runs the Loop; all
     futures are cancelled, then one more run is submitted with
     ``timeout=0`` (it fails as soon as a worker picks it up): the time from
     the cancels to its result (a worker was freed).

2. **Deadline overhead** (median of ``--rounds`` interleaved rounds): each
   round takes two samples without a timeout and two with ``timeout=1e6``
   (a watched control, checked before every node) in a balanced order
   (P T T P, then T P P T); reported are the medians of the paired ratio
   (timeout / plain), of the A/A ratio (one plain sample over the other: the
   noise floor) and of the paired difference per executed node (a whole-run cost divided by the nodes: for
   ONNX Runtime it is the per-run ``RunOptions``, not a per-node check).
   Models: a chain of 200 small ``Add`` nodes on [16] float32 tensors (every
   ``--backends``) and the onnx wheel's ``light`` models (``--models``,
   NumPy backend; random weights are fine, only time is measured).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import RunStoppedError
from nnrt_core.control import RunControl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # test-support models
from runaway_models import loop_model  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
X1 = {"x": np.zeros(1, np.float32)}


def add_chain(n: int = 200) -> bytes:
    nodes = [h.make_node("Add", [f"v{k}", "c"], [f"v{k + 1}"], name=f"add{k}") for k in range(n)]
    g = h.make_graph(nodes, "adds", [h.make_tensor_value_info("v0", T.FLOAT, [16])],
                     [h.make_tensor_value_info(f"v{n}", T.FLOAT, [16])],
                     [h.make_tensor("c", T.FLOAT, [16], [0.5] * 16)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


# ------------------------------------------------------------ stop latency
def cancel_trial(sess: Session, cancel_after: float = 0.2, cpu_window: float = 0.3) -> tuple[float, float]:
    """(seconds from cancel() to the run returning, thread CPU seconds in the ``cpu_window`` after cancel())."""
    control = RunControl()
    returned: list[float] = []
    park = threading.Event()
    started = threading.Event()

    def work() -> None:
        started.set()
        try:
            sess.run(X1, control=control)
        except RunStoppedError:
            pass
        returned.append(time.perf_counter())
        park.wait()  # stay alive (idle) so the CPU clock can still be read

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    clock = time.pthread_getcpuclockid(t.ident)  # type: ignore[arg-type]
    time.sleep(cancel_after)
    cpu0 = time.clock_gettime(clock)
    t0 = time.perf_counter()
    control.cancel()
    time.sleep(cpu_window)
    cpu1 = time.clock_gettime(clock)
    while not returned:
        time.sleep(0.001)
    park.set()
    t.join()
    return returned[0] - t0, cpu1 - cpu0


def deadline_trial(sess: Session, timeout: float = 0.2) -> float:
    """Seconds from the deadline to ``run`` returning."""
    t0 = time.perf_counter()
    try:
        sess.run(X1, timeout=timeout)
    except RunStoppedError:
        pass
    return time.perf_counter() - (t0 + timeout)


def pool_trial(sess: Session) -> float:
    """Seconds from cancelling every worker's run to a fresh run's result."""
    workers = sess.run_pool().workers
    futs = [sess.run_async(X1) for _ in range(workers)]
    while not all(f.running() for f in futs):
        time.sleep(0.001)
    time.sleep(0.1)
    t0 = time.perf_counter()
    for f in futs:
        f.cancel()
    assert isinstance(sess.run_async(X1, timeout=0).exception(timeout=60), RunStoppedError)
    return time.perf_counter() - t0


def stop_latency(backend: str, trials: int) -> dict[str, Any]:
    cfg = ScheduleConfig(backends=[backend])
    sess = Session(loop_model(), cfg)
    cancel, cpu, deadline, pool = [], [], [], []
    for _ in range(trials):
        lat, c = cancel_trial(sess)
        cancel.append(lat)
        cpu.append(c)
        deadline.append(deadline_trial(sess))
        pool.append(pool_trial(sess))
    med = statistics.median
    return {"backend": backend, "cancel_to_free_ms": 1e3 * med(cancel), "cpu_after_cancel_ms": 1e3 * med(cpu),
            "deadline_to_return_ms": 1e3 * med(deadline), "pool_cancel_to_next_result_ms": 1e3 * med(pool),
            "max_cancel_to_free_ms": 1e3 * max(cancel)}


# -------------------------------------------------------------- overhead
def nodes_run(sess: Session) -> int:
    return sum(len(p.nodes) for p in sess.partitions)


def overhead(name: str, model: Any, feeds_of: Callable[[Session], dict], rounds: int,
             backend: str = "numpy") -> dict[str, Any]:
    sess = Session(model, ScheduleConfig(backends=[backend]))
    feeds = feeds_of(sess)
    t0 = time.perf_counter()
    sess.run(feeds)
    one = time.perf_counter() - t0
    runs = max(1, int(0.05 / max(one, 1e-6)))  # ~50 ms per sample

    def sample(timeout: float | None) -> float:
        t = time.perf_counter()
        for _ in range(runs):
            sess.run(feeds, timeout=timeout)
        return (time.perf_counter() - t) / runs

    plain, timed, diffs, ratios, aa = [], [], [], [], []
    for r in range(rounds):  # interleaved, balanced order: P T T P, then T P P T
        order = (None, 1e6, 1e6, None) if r % 2 == 0 else (1e6, None, None, 1e6)
        got: dict[Any, list[float]] = {None: [], 1e6: []}
        for timeout in order:
            got[timeout].append(sample(timeout))
        (p1, p2), (t1, t2) = got[None], got[1e6]
        base, t = (p1 + p2) / 2, (t1 + t2) / 2
        plain.append(base)
        timed.append(t)
        diffs.append(t - base)
        ratios.append(t / base)
        aa.append(p2 / p1)  # A/A control: the noise of two identical samples
    med = statistics.median
    n = nodes_run(sess)
    return {"model": name, "backend": backend, "nodes": n, "no_timeout_ms": 1e3 * med(plain),
            "timeout_ms": 1e3 * med(timed), "ratio": med(ratios), "aa_ratio": med(aa),
            "overhead_us_per_node": 1e6 * med(diffs) / n}


def random_feeds(sess: Session) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(i.dtype)
            for i in sess.inputs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--models", default="squeezenet,inception_v1")
    ap.add_argument("--backends", default="numpy,onnxruntime")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report: dict[str, Any] = {"cores": os.cpu_count(), "stop": [], "overhead": []}
    for b in args.backends.split(","):
        report["stop"].append(stop_latency(b.strip(), args.trials))
    for b in args.backends.split(","):
        report["overhead"].append(overhead("200 Adds [16]", add_chain(), lambda s: {"v0": np.ones(16, np.float32)},
                                           args.rounds, b.strip()))
    for m in [m.strip() for m in args.models.split(",") if m.strip()]:
        report["overhead"].append(overhead(m, str(LIGHT / f"light_{m}.onnx"), random_feeds, args.rounds))
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    print(f"stop latency (median of {args.trials}; Loop of 2**62 trips)")
    print(f"{'backend':<12} {'cancel->free ms':>16} {'CPU after ms':>13} {'deadline->ret ms':>17} "
          f"{'pool cancel->next ms':>21} {'max cancel ms':>14}")
    for r in report["stop"]:
        print(f"{r['backend']:<12} {r['cancel_to_free_ms']:>16.2f} {r['cpu_after_cancel_ms']:>13.2f} "
              f"{r['deadline_to_return_ms']:>17.2f} {r['pool_cancel_to_next_result_ms']:>21.2f} "
              f"{r['max_cancel_to_free_ms']:>14.2f}")
    print(f"\ndeadline overhead (median of {args.rounds} interleaved rounds)")
    print(f"{'model':<16} {'backend':<12} {'nodes':>6} {'no timeout ms':>14} {'timeout ms':>11} {'ratio':>7} "
          f"{'A/A':>7} {'us/node':>8}")
    for r in report["overhead"]:
        print(f"{r['model']:<16} {r['backend']:<12} {r['nodes']:>6} {r['no_timeout_ms']:>14.4f} "
              f"{r['timeout_ms']:>11.4f} {r['ratio']:>7.3f} {r['aa_ratio']:>7.3f} {r['overhead_us_per_node']:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
