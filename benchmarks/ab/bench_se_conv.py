"""The squeeze-excite + 1x1 Conv step (``nnrt_numpy/fusion_seconv.py``) against the two steps
it replaces, on the mobile models, in one process.

    python benchmarks/ab/bench_se_conv.py [--models ppocr_v2_cls,ppocr_v6_rec_tiny] [--batches 1,8] [--calls 200]

Two NumPy-only sessions per model and batch, one thread each (``num_threads=1``): one built as
shipped, one with the merge turned off while it is built (``program.merge_se_conv`` replaced by
the identity); calls alternate between the two, CPU time of the calling thread, so the
machine's load hits both alike.  Printed: median ms per call of each, their ratio (merged /
separate), how many steps were merged, the largest output difference and the 1-minute load
average.
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
from nnrt_numpy import program

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the shared benchmark modules
import real_models as rm  # noqa: E402


def merged_steps(sess: Session) -> int:
    return sum(type(st.chain).__name__ == "SEConvChain" for part in sess.compiled_model.compiled
               if getattr(part, "program", None) is not None for st in part.program.steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="ppocr_v2_cls,ppocr_v6_rec_tiny")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    root = rm.models_dir(None)
    print(f"load average (1 min) {os.getloadavg()[0]:.2f}; CPU ms per call, one thread, calls alternated")
    print(f"{'model':<20} {'batch':>5} {'separate':>9} {'merged':>9} {'ratio':>6} {'steps':>5} {'max diff':>9}")
    for name, path, b, feeds in rm.model_batches(args.models, args.batches, root):
        cfg = ScheduleConfig(backends=["numpy"], num_threads=1)
        merged = Session(str(path), cfg)
        keep = program.merge_se_conv
        program.merge_se_conv = lambda chains, readers: list(chains)
        try:
            separate = Session(str(path), cfg)
        finally:
            program.merge_se_conv = keep
        outs = [list(s.run(feeds).values()) for s in (separate, merged)]
        diff = max(float(np.abs(x - y).max()) for x, y in zip(*outs))
        times: tuple[list, list] = ([], [])
        for i in range(args.calls):
            for k in ((0, 1) if i % 2 else (1, 0)):
                s = (separate, merged)[k]
                t0 = time.thread_time()
                s.run(feeds)
                times[k].append(time.thread_time() - t0)
        a, m = (statistics.median(t) * 1e3 for t in times)
        print(f"{name:<20} {b:5d} {a:9.3f} {m:9.3f} {m / a:6.3f} {merged_steps(merged):5d} {diff:9.2e}",
              flush=True)
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
