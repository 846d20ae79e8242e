"""The NumPy backend's depthwise ways (``rows``, ``cols``, ``cl``) on the same shapes, one thread, CPU time.

    python benchmarks/ab/bench_depthwise_ways.py [--runs 40] [--shapes N,C,H,W,K,SH;...]

Per shape (a "same"-padded K x K depthwise conv with bias, stride SH across rows, 1 along them)
every way of :class:`nnrt_numpy.ops.nn._depthwise.DepthwisePlan` is forced and timed alone
(``time.thread_time`` around ``plan.run(..., nthreads=1)``, median of ``--runs``), and the way
the plan picks by itself is named; ``rows/best`` is the ``rows`` time over the better of the
other two, and every way's output is checked against ``cols``.  The 1-minute load average is
printed before and after: CPU time of one thread is what a loaded machine disturbs least.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from nnrt_numpy.ops.nn._depthwise import DepthwisePlan

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the shared benchmark modules
from bench_mobile import thread_cpu_s  # noqa: E402

#: PP-OCR / MobileNet depthwise shapes (N, C, H, W, K, SH): few-row maps, 12-row maps, taller ones
SHAPES = [(8, 200, 2, 96, 5, 1), (8, 88, 3, 96, 5, 1), (1, 480, 3, 80, 5, 1), (1, 160, 3, 80, 3, 1),
          (1, 480, 6, 80, 5, 2), (1, 96, 6, 80, 3, 1), (1, 240, 12, 80, 5, 1), (1, 48, 12, 80, 3, 1),
          (1, 128, 12, 160, 3, 1), (1, 384, 10, 15, 5, 1), (8, 240, 12, 80, 5, 1), (1, 64, 24, 160, 3, 1),
          (1, 544, 7, 7, 3, 1), (1, 544, 14, 14, 3, 1), (1, 64, 56, 56, 3, 1), (8, 256, 28, 28, 5, 2)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--shapes", default=None, help="N,C,H,W,K,SH;... (default: PP-OCR / MobileNet shapes)")
    args = ap.parse_args()
    shapes = SHAPES if not args.shapes else [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";")]
    rng = np.random.default_rng(0)
    print(f"load average (1 min) {os.getloadavg()[0]:.2f}; CPU us of one thread, medians of {args.runs}")
    print(f"{'shape (N, C, H, W, K, SH)':<28} {'cols':>8} {'cl':>8} {'rows':>8} {'picks':>6} {'rows/best':>9} "
          f"{'max |diff|':>10}")
    for n, c, h, w, k, sh in shapes:
        p = k // 2
        ho = (h + 2 * p - k) // sh + 1
        x = rng.standard_normal((n, c, h, w)).astype(np.float32)
        wt = rng.standard_normal((c, 1, k, k)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        geo = (n, c, 1, (h, w), (k, k), (sh, 1), (1, 1), (p, p), (p, p), (ho, w), np.float32)
        us, outs = {}, {}
        for mode in ("cols", "cl", "rows"):
            plan = DepthwisePlan(*geo, mode=mode)
            y = np.empty((n, c, ho, w), np.float32)
            us[mode] = thread_cpu_s(lambda: plan.run(x, wt, b, y, 1), args.runs) * 1e6
            outs[mode] = y
        diff = max(float(np.abs(outs[m] - outs["cols"]).max()) for m in ("cl", "rows"))
        picks = DepthwisePlan(*geo).mode
        print(f"{str((n, c, h, w, k, sh)):<28} {us['cols']:8.0f} {us['cl']:8.0f} {us['rows']:8.0f} {picks:>6} "
              f"{us['rows'] / min(us['cols'], us['cl']):9.2f} {diff:10.1e}", flush=True)
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
