"""Steady runs of raw ONNX Runtime with its memory pattern on against off,
and the first two runs of each, interleaved in one process.

    python benchmarks/ab/ort_mem_pattern_ab.py [--runs 300] [--models mobile,light] [--batch 8]
    python benchmarks/ab/ort_mem_pattern_ab.py --model PATH --shape 1,3,48,320

The ORT backend switches ``enable_mem_pattern`` off by default on the CPU
provider (see docs/plugins.md, "warm-up"): with it on, ORT records a memory
pattern on the first run at a new input shape and allocates the pattern's
block (fresh pages, first-touch faults) on the second, so the first *two*
runs at every shape are slow and a warm-up run does not make the first real
run a steady one.  This prints what that costs a steady run: two sessions of
the same model (pattern on / off) run alternately, ``--runs`` times each; the
medians of wall and thread CPU time of each, their ratio (off / on), and the
load average.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: the shared benchmark modules
from bench_cold_start import models  # noqa: E402


def session(path: str, pattern: bool) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.enable_mem_pattern = pattern
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def measure(model: dict, runs: int) -> None:
    on, off = session(str(model["path"]), True), session(str(model["path"]), False)
    feeds = {model["input"]: np.random.default_rng(0).standard_normal(model["shape"]).astype(np.float32)}
    first = {}
    for key, s in (("on", on), ("off", off)):
        t = []
        for _ in range(2):
            t0 = time.perf_counter()
            s.run(None, feeds)
            t.append(time.perf_counter() - t0)
        first[key] = t
    for s in (on, off):
        for _ in range(5):
            s.run(None, feeds)
    wall: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(runs):
        for key in (("on", "off") if i % 2 else ("off", "on")):
            s = on if key == "on" else off
            c0, t0 = time.process_time(), time.perf_counter()
            s.run(None, feeds)
            wall[key].append(time.perf_counter() - t0)
            cpu[key].append(time.process_time() - c0)
    w = {k: statistics.median(v) for k, v in wall.items()}
    c = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"{model['key']}: steady medians of {runs} interleaved runs; load average {os.getloadavg()}")
    for k in ("on", "off"):
        print(f"  mem pattern {k:3s}  wall {w[k] * 1e3:7.3f} ms  cpu {c[k] * 1e3:7.3f} ms  "
              f"first two runs {first[k][0] * 1e3:6.2f}, {first[k][1] * 1e3:6.2f} ms (one process, indicative)")
    print(f"  off / on        wall {w['off'] / w['on']:.3f}      cpu {c['off'] / c['on']:.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--models", default="mobile,light")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--model", help="an ONNX file instead of --models (its first input is fed float32 --shape)")
    ap.add_argument("--shape", help="the feed's shape with --model, e.g. 1,3,48,320")
    args = ap.parse_args()
    chosen = models(args.models.split(","), args.batch)
    if args.model:
        if not args.shape:
            raise SystemExit("--shape is needed with --model")
        name = session(args.model, True).get_inputs()[0].name
        chosen = [{"key": f"{os.path.basename(args.model)} [{args.shape}]", "path": args.model, "input": name,
                   "shape": [int(d) for d in args.shape.split(",")]}]
    for model in chosen:
        measure(model, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
