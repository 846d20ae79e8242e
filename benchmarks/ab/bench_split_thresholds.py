"""Where splitting a kernel over two threads pays on the NumPy backend: mobile
models run under several split thresholds, alternated in one process.

    python benchmarks/ab/bench_split_thresholds.py [--models ppocr_v6_rec_tiny,ppocr_v2_cls]
        [--batches 1,8] [--rounds 5] [--runs 7] [--configs current,1thread,...]

A configuration sets the split rule ``nnrt_numpy.parallel.SPLIT_US``,
``COLD_SPLIT_US`` and ``RATES`` (``current``; ``old``: the cut-offs before the rule, GEMM / Conv
from 8 M multiply-adds, depthwise from 1 M, Softmax from 1 M values;
``us200`` / ``us350`` / ``us500`` / ``us800``: ``SPLIT_US`` and
``COLD_SPLIT_US`` both that value), or runs on one thread
(``1thread``: ``num_threads=1``).  For every model and batch the sessions of
all configurations are built once, then ``--rounds`` rounds each time every
configuration in turn for ``--runs`` calls (blocks, so a configuration's
helper thread state is its own); printed: per configuration the median wall
ms over all calls, the median process CPU ms per call (both threads), and
the ratio of wall to the ``current`` configuration.  The 1-minute load
average is printed with every model: with other jobs on the two cores, the
second core is not idle and splits measure them too.

A second part (``--handoff``) times a GIL-free GEMM cut in two pieces on one
thread and on two (``parallel.run_chunks``), the cost of handing a piece to
the helper thread.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from nnrt_core import ScheduleConfig, Session
from nnrt_numpy import blas, parallel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the shared benchmark modules
import real_models as rm  # noqa: E402

#: the cut-offs before the split rule (bfce14a): GEMM / Conv splits from 8 M multiply-adds,
#: depthwise from 1 M (1 << 20), Softmax from 1 M values, as rates under SPLIT_US = 200
OLD_RATES = {"gemm": 40_000.0, "im2col": 40_000.0, "depthwise": 5_243.0, "dw_input": 1e18, "softmax": 5_243.0,
             "tail": 1e18}
#: name -> (parallel.SPLIT_US, parallel.COLD_SPLIT_US, parallel.RATES, threads or None)
CONFIGS = {
    "current": (parallel.SPLIT_US, parallel.COLD_SPLIT_US, dict(parallel.RATES), None),
    "1thread": (parallel.SPLIT_US, parallel.COLD_SPLIT_US, dict(parallel.RATES), 1),
    "old": (200.0, 200.0, OLD_RATES, None),
    **{f"us{u}": (float(u), float(u), dict(parallel.RATES), None) for u in (200, 350, 500, 800)},
}


def _set(c: str) -> int | None:
    parallel.SPLIT_US, parallel.COLD_SPLIT_US, rates, th = CONFIGS[c]
    parallel.RATES.clear()
    parallel.RATES.update(rates)
    return th


def handoff(sizes=(128, 256, 512, 1024, 2048), reps: int = 200) -> None:
    parallel.start_helpers()
    blas.enter(1)
    try:
        print(f"hand-off (GEMM 128x128xN in two pieces), load {os.getloadavg()[0]:.2f}")
        for n in sizes:
            a = np.random.rand(128, 128).astype(np.float32)
            b = np.random.rand(128, n).astype(np.float32)
            o = np.empty((128, n), np.float32)
            jobs = [(a, b[:, :n // 2], o[:, :n // 2]), (a, b[:, n // 2:], o[:, n // 2:])]

            def piece(i: int) -> None:
                x, y, z = jobs[i]
                np.matmul(x, y, out=z)

            r: dict[int, list] = {1: [], 2: []}
            for _ in range(reps):
                for k in (1, 2):
                    t0 = time.perf_counter()
                    parallel.run_chunks(piece, 2, k)
                    r[k].append(time.perf_counter() - t0)
            a1, a2 = (statistics.median(r[k]) * 1e6 for k in (1, 2))
            print(f"  128x128x{n:<5} ({128 * 128 * n / 1e6:5.1f} M MACs): one thread {a1:7.1f} us, "
                  f"two {a2:7.1f} us, ratio {a2 / a1:.2f}", flush=True)
    finally:
        blas.leave()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ppocr_v6_rec_tiny,ppocr_v2_cls")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--configs", default="current,1thread,old,us500")
    ap.add_argument("--handoff", action="store_true", help="also time the two-piece hand-off")
    args = ap.parse_args()
    if args.handoff:
        handoff()
    configs = args.configs.split(",")
    root = rm.models_dir(None)
    for name, path, b, feeds in rm.model_batches(args.models, args.batches, root):
        sess = {}
        for c in configs:  # built under its thresholds (depthwise plans size their pieces at build)
            th = _set(c)
            sess[c] = Session(str(path), ScheduleConfig(backends=["numpy"], **({"num_threads": th} if th else {})))
        wall: dict[str, list] = {c: [] for c in configs}
        cpu: dict[str, list] = {c: [] for c in configs}
        load0 = os.getloadavg()[0]
        for _ in range(args.rounds):
            for c in configs:
                _set(c)
                sess[c].run(feeds)
                for _ in range(args.runs):
                    t0, c0 = time.perf_counter(), time.process_time()
                    sess[c].run(feeds)
                    wall[c].append(time.perf_counter() - t0)
                    cpu[c].append(time.process_time() - c0)
        _set("current")
        base = statistics.median(wall[configs[0]])
        print(f"\n{name} batch {b} (load {load0:.2f} -> {os.getloadavg()[0]:.2f})")
        for c in configs:
            w = statistics.median(wall[c])
            print(f"  {c:<14} wall {w * 1e3:8.2f} ms  cpu {statistics.median(cpu[c]) * 1e3:8.2f} ms  "
                  f"wall / {configs[0]} {w / base:5.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
