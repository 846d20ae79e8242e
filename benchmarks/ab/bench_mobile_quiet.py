"""Wall time of the mobile models on the NumPy backend and ONNX Runtime, counting only calls
during which no other process ran (for a shared machine).

    python benchmarks/ab/bench_mobile_quiet.py [--models ppocr_v2_cls,ppocr_v6_rec_tiny] [--batches 1,8]
                                            [--calls 200] [--block 10]

Both sides on their default threads (nnrt: its split kernels on the idle cores; ORT: its pool of
two).  Calls alternate in blocks of ``--block`` (nnrt, then ORT, a 50 ms pause before each block
so the other side's spinning threads go to sleep), ``--calls`` per side.  Right before and right
after every call the runnable-task count of ``/proc/loadavg`` is read and this process's own
running threads (``/proc/self/task/*/stat``) are taken off it: a call counts only when no other
task was running at either end (another engineer's job on the second core makes both sides'
two-thread figures meaningless).  The first call of a block is not timed.  Printed per model and batch: the median wall ms of the kept
calls of each side, how many were kept, and the ratio.  A/B between source trees: run it with
each tree's ``PYTHONPATH`` (``bench_mobile_ab.py`` does that for ``bench_mobile.py``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import onnxruntime as ort

from nnrt_core import ScheduleConfig, Session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the shared benchmark modules
import real_models as rm  # noqa: E402


def others_running() -> int:
    """Runnable tasks on the machine that are not threads of this process."""
    with open("/proc/loadavg") as f:
        total = int(f.read().split()[3].split("/")[0])
    mine = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                mine += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except OSError:
            continue
    return max(0, total - mine)


def timed_block(call, n: int, keep: list, seen: list) -> None:
    time.sleep(0.05)
    call()  # not timed: the first call after the pause wakes the cores and caches
    for _ in range(n):
        before = others_running()
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        seen.append(dt)
        if before == 0 and others_running() == 0:
            keep.append(dt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="ppocr_v6_rec_tiny,ppocr_v2_cls")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--block", type=int, default=10)
    args = ap.parse_args()
    root = rm.models_dir(None)
    print(f"load average (1 min) {os.getloadavg()[0]:.2f}; calls kept only while no other task ran")
    print(f"{'model':<20} {'batch':>5} {'nnrt ms':>8} {'kept':>5} {'ORT ms':>8} {'kept':>5} {'ratio':>6}"
          f" {'all: nnrt':>9} {'ORT':>7}")
    for name, path, b, feeds in rm.model_batches(args.models, args.batches, root):
        sess = Session(str(path), ScheduleConfig(backends=["numpy"]))
        ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        ours = lambda: sess.run(feeds)  # noqa: E731
        theirs = lambda: ref.run(None, feeds)  # noqa: E731
        ours(), theirs()
        kept: tuple[list, list] = ([], [])
        seen: tuple[list, list] = ([], [])
        for _ in range(max(1, args.calls // args.block)):
            timed_block(ours, args.block, kept[0], seen[0])
            timed_block(theirs, args.block, kept[1], seen[1])
        med = [statistics.median(k) * 1e3 if k else float("nan") for k in kept]
        alls = [statistics.median(s) * 1e3 for s in seen]
        print(f"{name:<20} {b:5d} {med[0]:8.2f} {len(kept[0]):5d} {med[1]:8.2f} {len(kept[1]):5d} "
              f"{med[0] / med[1]:6.2f} {alls[0]:9.2f} {alls[1]:7.2f}", flush=True)
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
