"""nnrt's ONNX Runtime backend with and without its warm-up at build, in fresh
processes: the first run against a steady run, page faults, build time.

    python benchmarks/ab/ort_warm_up_ab.py [--model mobile|light|PATH] [--shape 8,3,48,192] [--rounds 9]
        [--variants nowarm,warm,run,shapes+run]

Each child (a fresh process, as a user's) builds
``Session(model, ScheduleConfig(backends=["onnxruntime"], ...))`` and runs
the same random feed 20 times.  Variants are ``+``-joined words:

* ``nowarm``: backend option ``warm_up = false``; ``warm``: the default
  (``"heap"``: the allocator tuned and a heap prefault); ``run``:
  ``warm_up = "run"`` (a run on zeros when the shapes are static);
* ``shapes``: ``input_shapes`` fixes the input to ``--shape`` (a static
  model: with ``run``, the warm-up is a run on zeros);
* ``pattern``: ``enable_mem_pattern = true`` (ORT's own default);
* ``heapN``: the heap prefault is N MiB
  (``nnrt_onnxruntime.warmup.HEAP_BYTES``; default 8).

It prints, per variant, medians over ``--rounds`` children (interleaved
round by round) of: the build (``Session(...)``) and its ``warmup`` stage,
the first and second runs, the steady run (median of runs 4..20), first /
steady and second / steady (medians of the per-process ratios), the minor
page faults of runs 1 and 2, and build + first run; with the load average.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

import onnx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: the shared benchmark modules
from bench_cold_start import child_env, models, result_of  # noqa: E402

CHILD = r"""
import sys, time, resource, json, statistics, numpy as np
import nnrt_onnxruntime.warmup as warmup
from nnrt_core import Session, ScheduleConfig
path, name, shape, variant = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3].split(",")], sys.argv[4]
opts, kw = {}, {}
for v in variant.split("+"):
    if v == "nowarm": opts["warm_up"] = False
    elif v == "pattern": opts["enable_mem_pattern"] = True
    elif v == "shapes": kw["input_shapes"] = {name: shape}
    elif v.startswith("heap"): warmup.HEAP_BYTES = int(v[4:]) << 20
    elif v == "run": opts["warm_up"] = "run"
t0 = time.perf_counter()
s = Session(path, ScheduleConfig(backends=["onnxruntime"], backend_options={"onnxruntime": opts}, **kw))
build = time.perf_counter() - t0
x = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
def one():
    f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt; t = time.perf_counter(); s.run(x)
    return time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f
runs = [one() for _ in range(20)]
steady = statistics.median(r[0] for r in runs[3:])
print("RESULT " + json.dumps({"build": build, "warm": s.stats()["build"].get("warmup", 0.0), "first": runs[0][0],
      "second": runs[1][0], "steady": steady, "f1": runs[0][1], "f2": runs[1][1]}))
"""


def child(path: str, name: str, shape: str, variant: str, env: dict) -> dict:
    """One fresh process of ``variant``."""
    out = subprocess.run([sys.executable, "-c", CHILD, path, name, shape, variant], capture_output=True, text=True,
                         env=env)
    return result_of(out, variant)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobile", help="mobile (PP-OCR cls), light (SqueezeNet) or a path")
    ap.add_argument("--shape", default=None, help="the feed's shape (default: the benchmark model's)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--variants", default="nowarm,warm")
    args = ap.parse_args()
    if args.model in ("mobile", "light"):
        m = models([args.model], args.batch)[0]
        path, shape = str(m["path"]), args.shape or ",".join(map(str, m["shape"]))
    else:
        if not args.shape:
            raise SystemExit("--shape is needed with a model path")
        path, shape = args.model, args.shape
    g = onnx.load(path, load_external_data=False).graph
    name = next(v.name for v in g.input if v.name not in {t.name for t in g.initializer})  # the (first) feed
    env = child_env(keep=False)
    variants = args.variants.split(",")
    print(f"load average before: {os.getloadavg()}")
    res: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants[r % len(variants):] + variants[:r % len(variants)]:
            res[v].append(child(path, name, shape, v, env))
    print(f"{os.path.basename(path)} [{shape}]: medians of {args.rounds} fresh processes, ms; "
          f"load average after: {os.getloadavg()}")
    print(f"  {'variant':18s} {'build':>7s} {'warmup':>7s} {'first':>7s} {'second':>7s} {'steady':>7s} "
          f"{'1st/st':>6s} {'2nd/st':>6s} {'faults1':>7s} {'faults2':>7s} {'build+1st':>9s}")
    for v, rows in res.items():
        def med(key: str) -> float:
            return statistics.median(r[key] for r in rows)
        print(f"  {v:18s} {med('build') * 1e3:7.1f} {med('warm') * 1e3:7.1f} {med('first') * 1e3:7.2f} "
              f"{med('second') * 1e3:7.2f} {med('steady') * 1e3:7.2f} "
              f"{statistics.median(r['first'] / r['steady'] for r in rows):6.2f} "
              f"{statistics.median(r['second'] / r['steady'] for r in rows):6.2f} {med('f1'):7.0f} {med('f2'):7.0f} "
              f"{statistics.median(r['build'] + r['first'] for r in rows) * 1e3:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
