"""Raw ONNX Runtime's own first runs against its steady run, in fresh
processes: does a warm-up run at session build make the first real run a
steady one?

    python benchmarks/ab/ort_first_runs.py [--rounds 7] [--runs 5] [--steady 15] [--batch 8] [--models mobile,light]

Issue #19 asks that the first run be at most 1.5x a steady run on every
backend, and suggests warm-up at build where it is cheap.  On the ONNX
Runtime backend nnrt's run is ORT's run of the partition, so what ORT itself
does on its first runs bounds what nnrt can reach.  Each child (a fresh
process, as a user's) builds an ``InferenceSession`` and then, by variant:

* ``none``: runs 1..``--runs`` on the real feed;
* ``warm zeros``: one untimed run on zeros of the feed's shape first (what a
  warm-up at build could do when the input shapes are known), then the same;
* ``warm b1``: one untimed run on a batch-1 zero feed first (what it could do
  when the batch is free).

It prints, per variant, the medians over ``--rounds`` children of run k's
time divided by the same child's steady run (median of ``--steady`` runs
after them), and the warm-up run's own time.  Variants are interleaved round
by round.  Models as in ``bench_cold_start.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: the shared benchmark modules
from bench_cold_start import child_env, models  # noqa: E402

CHILD = r"""
import sys, time, json
import numpy as np, onnxruntime as ort
variant, path, name, shape, runs, steady = sys.argv[1], sys.argv[2], sys.argv[3], [int(d) for d in sys.argv[4].split(",")], int(sys.argv[5]), int(sys.argv[6])
spec = dict(kv.split("=") for kv in variant.split("+")[1:])  # "WARM+opt=value+...": session options
so = ort.SessionOptions()
for k, v in spec.items():
    if k == "mem_pattern":
        so.enable_mem_pattern = v == "1"
    elif k == "cpu_arena":
        so.enable_cpu_mem_arena = v == "1"
    else:
        so.add_session_config_entry(k, v)
sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
feeds = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
warm = 0.0
kind = variant.split("+")[0]
if kind != "none":
    zshape = shape if kind == "warm zeros" else [int(kind[len("warm b"):])] + shape[1:]
    t = time.perf_counter(); sess.run(None, {name: np.zeros(zshape, np.float32)}); warm = time.perf_counter() - t
times = []
for _ in range(runs + steady):
    t = time.perf_counter(); sess.run(None, feeds); times.append(time.perf_counter() - t)
s = sorted(times[runs:])[steady // 2]
print("RESULT " + json.dumps({"ratios": [x / s for x in times[:runs]], "steady": s, "warm": warm}))
"""

VARIANTS = ["none", "warm zeros", "warm b1"]  #: the default ``--variants``


def child(variant: str, model: dict, runs: int, steady: int, env: dict) -> dict:
    shape = ",".join(str(d) for d in model["shape"])
    out = subprocess.run([sys.executable, "-c", CHILD, variant, str(model["path"]), model["input"], shape, str(runs),
                          str(steady)], capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steady", type=int, default=15)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--models", default="mobile,light")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated: none, 'warm zeros' or 'warm bN' (a batch-N warm-up), each optionally "
                         "followed by '+mem_pattern=0', '+cpu_arena=0' or '+KEY=VALUE' (a session config entry)")
    args = ap.parse_args()
    env = child_env(keep=False)
    for model in models(args.models.split(","), args.batch):
        variants = args.variants.split(",")
        results: dict[str, list[dict]] = {v: [] for v in variants}
        for r in range(args.rounds):
            for v in variants[r % len(variants):] + variants[:r % len(variants)]:
                results[v].append(child(v, model, args.runs, args.steady, env))
        print(f"\n{model['key']}: raw ONNX Runtime, run k / steady run, medians of {args.rounds} fresh processes")
        print(f"  {'variant':28s} {'warm-up ms':>10s} {'steady ms':>9s}  " + " ".join(f"{'run ' + str(k + 1):>6s}"
                                                                           for k in range(args.runs)))
        for v, rows in results.items():
            ratios = [statistics.median(r["ratios"][k] for r in rows) for k in range(args.runs)]
            print(f"  {v:28s} {statistics.median(r['warm'] for r in rows) * 1e3:10.2f} "
                  f"{statistics.median(r['steady'] for r in rows) * 1e3:9.2f}  " + " ".join(f"{x:6.2f}" for x in ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
