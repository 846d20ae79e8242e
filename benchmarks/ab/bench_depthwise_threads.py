"""The NumPy backend's depthwise kernel on one thread against two, per shape.

    python benchmarks/ab/bench_depthwise_threads.py [--runs 15] [--max-wait 20] [--json]

For the microbenchmark shapes of ``bench_mobile.py`` and the depthwise
shapes of the PP-OCR models (batch 1 and 8), one ``DepthwisePlan`` per
shape (bias, float32, every shape split into pieces: ``parallel.SPLIT_US``
set to 0 here) runs with ``nthreads=1`` and ``nthreads=2``, interleaved call
by call; prints the median wall time of each, the speedup, the
multiply-adds, CPU time of one thread (to set the split rule's
``SPLIT_US`` cut-off and depthwise rate from the table), and checks that
both results are equal bit for bit.

Two threads only help when the second core is idle.  On a shared machine a
sample is kept only when ``/proc/loadavg`` shows no other runnable task just
before and just after the call (the counts of kept samples are printed; a
shape gets ``nan`` when none could be taken within ``--max-wait`` seconds),
and the 1-minute load average is printed before and after.  Even so, a
neighbour that starts mid-call slows the two-thread side most: rerun on a
quiet machine before trusting a speedup below 1.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from nnrt_numpy import parallel
from nnrt_numpy.ops.nn import _depthwise

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the shared benchmark modules
from bench_mobile import MODEL_SHAPES, SHAPES  # noqa: E402

try:
    _LOADAVG = os.open("/proc/loadavg", os.O_RDONLY)
except OSError:
    _LOADAVG = -1


def others_running() -> bool:
    """Whether a task besides the caller is runnable now (False where /proc is missing)."""
    if _LOADAVG < 0:
        return False
    return int(os.pread(_LOADAVG, 128, 0).split()[3].split(b"/")[0]) > 1


def cases() -> list[tuple]:
    """(label, n, c, h, w, kernel (kh, kw), strides, dilation, pads (ph, pw), multiplier)."""
    out = [(label, n, c, h, w, (k, k), (s, s), d, (p, p), m) for label, n, c, h, w, k, s, d, p, m in SHAPES]
    for n0, c, h, w, k, sh, sw in MODEL_SHAPES:
        for n in sorted({n0, 8}):
            out.append((f"PP-OCR {n}x{c}x{h}x{w} k{k} s{sh}{sw}", n, c, h, w, (k, k), (sh, sw), 1, (k // 2, k // 2), 1))
    return out


def measure(case: tuple, runs: int, max_wait: float) -> dict:
    label, n, c, h, w, k, s, d, p, m = case
    out = [(size + 2 * pp - d * (kk - 1) - 1) // ss + 1 for size, kk, ss, pp in zip((h, w), k, s, p)]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c * m, 1) + k).astype(np.float32)
    b = rng.standard_normal(c * m).astype(np.float32)
    plan = _depthwise.DepthwisePlan(n, c, m, (h, w), k, s, (d, d), p, p, out, np.float32)
    plan.warm(2)
    ys = [np.empty((n, c * m) + tuple(out), np.float32) for _ in range(2)]
    for t in (1, 2):
        plan.run(x, wt, b, ys[t - 1], nthreads=t)
    same = bool(np.array_equal(ys[0], ys[1]))
    cpu = []
    for _ in range(runs):
        t0 = time.thread_time()
        plan.run(x, wt, b, ys[0], nthreads=1)
        cpu.append(time.thread_time() - t0)
    walls: dict[int, list[float]] = {1: [], 2: []}
    deadline = time.monotonic() + max_wait
    while min(len(v) for v in walls.values()) < runs and time.monotonic() < deadline:
        for t in (1, 2):
            if others_running():
                time.sleep(0.002)
                continue
            t0 = time.perf_counter()
            plan.run(x, wt, b, ys[t - 1], nthreads=t)
            dt = time.perf_counter() - t0
            if not others_running():
                walls[t].append(dt)
    med = {t: statistics.median(v) * 1e3 if v else float("nan") for t, v in walls.items()}
    return {"shape": label, "macs_m": plan.work / 1e6, "mode": plan.mode, "pieces": plan.nblocks,
            "cpu1_ms": statistics.median(cpu) * 1e3, "wall1_ms": med[1], "wall2_ms": med[2],
            "speedup": med[1] / med[2], "kept": [len(walls[1]), len(walls[2])], "bit_equal": same}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--max-wait", type=float, default=20.0, help="seconds per shape to collect quiet samples")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    split = parallel.SPLIT_US
    parallel.SPLIT_US = 0  # every plan cut into pieces (DepthwisePlan asks worth_splitting), to see where it stops paying
    parallel.start_helpers()
    load0 = os.getloadavg()[0]
    if not args.json:
        print(f"load average (1 min) {load0:.2f} on {os.cpu_count()} cores; medians of {args.runs} quiet samples")
        print(f"{'depthwise conv':<34} {'M MACs':>7} {'mode':>4} {'pieces':>6} {'cpu 1t':>7} {'wall 1t':>8} "
              f"{'wall 2t':>8} {'speedup':>7} {'kept':>7} bit-equal")
    rows = []
    for case in cases():
        r = measure(case, args.runs, args.max_wait)
        rows.append(r)
        if not args.json:
            print(f"{r['shape']:<34} {r['macs_m']:7.2f} {r['mode']:>4} {r['pieces']:6d} {r['cpu1_ms']:7.2f} "
                  f"{r['wall1_ms']:8.2f} {r['wall2_ms']:8.2f} {r['speedup']:7.2f} {'/'.join(map(str, r['kept'])):>7} "
                  f"{r['bit_equal']}", flush=True)
    load1 = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"rows": rows, "load_average": [load0, load1], "split_us": split}, indent=2))
    else:
        print(f"load average (1 min) after: {load1:.2f}; the Conv kernel splits from an estimated {split:.0f} µs of "
              "one thread (parallel.SPLIT_US)")
    return 0 if all(r["bit_equal"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
