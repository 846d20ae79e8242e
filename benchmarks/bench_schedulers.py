"""The ``cost`` scheduler against single-backend sessions on the onnx wheel's
``light`` models.

CPU part (measured): per model, a numpy-only session, an onnxruntime-only
session (backup numpy) and a ``cost`` session over both are built; their runs
are interleaved call by call (the order rotates every iteration) and the
medians compared: ratio = cost / min(numpy, onnxruntime).  Target: <= 1.05.

NPU part (estimated): a ``cost`` session over npu_emu + onnxruntime + numpy;
its candidate plans are evaluated the same way (simulated NPU time + measured
CPU partitions + host<->device transfers), so the chosen plan's estimate is
compared with the best single-backend plan's (npu_emu with its backup,
onnxruntime, numpy).  Target: cost <= best single.

    python benchmarks/bench_schedulers.py [--iters N] [--models a,b] [--no-npu] [--check] [--json FILE]

Profiles are cached per machine (``$NNRT_CACHE_DIR``, default ~/.cache/nnrt):
the first build of a model measures, later builds do not ("build s" shows both).
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import statistics
import sys
import time
from typing import Any

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session

LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
         "vgg19", "zfnet512"]
CPU_TARGET = 1.05
PAUSE_SECONDS = 0.02  # lets ONNX Runtime's spinning worker threads go idle between calls


def light_path(name: str) -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")


def feeds_for(sess: Session) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {i.name: rng.random(tuple(d if isinstance(d, int) else 1 for d in i.shape)).astype(i.dtype)
            for i in sess.inputs}


def build(path: str, cfg: ScheduleConfig) -> tuple[Session, float]:
    t0 = time.perf_counter()
    sess = Session(path, cfg)
    return sess, time.perf_counter() - t0


def interleaved_medians(sessions: dict[str, Session], feeds: dict[str, np.ndarray], iters: int) -> dict[str, float]:
    """Median per session; the call order cycles through every permutation and
    a short pause separates calls, because ONNX Runtime's worker threads keep
    spinning after a run and slow down whatever runs right after it."""
    names = list(sessions)
    for n in names:
        sessions[n].run(feeds)  # warm-up
    orders = list(itertools.permutations(names))
    times: dict[str, list[float]] = {n: [] for n in names}
    gc.disable()
    try:
        for i in range(iters):
            for n in orders[i % len(orders)]:
                time.sleep(PAUSE_SECONDS)
                t0 = time.perf_counter()
                sessions[n].run(feeds)
                times[n].append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return {n: statistics.median(t) for n, t in times.items()}


def cpu_row(name: str, iters: int) -> dict[str, Any]:
    path = light_path(name)
    numpy_s, _ = build(path, ScheduleConfig(backends=["numpy"]))
    ort_s, _ = build(path, ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    cost_s, cost_build = build(path, ScheduleConfig(backends=["onnxruntime", "numpy"], scheduler="cost"))
    _, cost_rebuild = build(path, ScheduleConfig(backends=["onnxruntime", "numpy"], scheduler="cost"))
    med = interleaved_medians({"numpy": numpy_s, "onnxruntime": ort_s, "cost": cost_s}, feeds_for(numpy_s), iters)
    best = min(med["numpy"], med["onnxruntime"])
    chosen = cost_s.compiled_model.scheduler.chosen
    return {"model": name, "numpy_ms": med["numpy"] * 1e3, "onnxruntime_ms": med["onnxruntime"] * 1e3,
            "cost_ms": med["cost"] * 1e3, "ratio": med["cost"] / best,
            "cost_plan": chosen.label if chosen else "priority", "partitions": len(cost_s.partitions),
            "build_s": cost_build, "rebuild_s": cost_rebuild}


def npu_row(name: str) -> dict[str, Any]:
    # on_overflow="warn": the light models' placeholder weights exceed fp16; this compares the plans' speed
    sess, _ = build(light_path(name), ScheduleConfig(precision="fp16", backends=["npu_emu", "onnxruntime", "numpy"], scheduler="cost",
                                                     on_overflow="warn"))
    sched = sess.compiled_model.scheduler
    singles = {p.label: p.seconds for p in sched.plans if p.problem is None and p.label != "per-node"}
    per_node = next((p.seconds for p in sched.plans if p.label == "per-node" and p.problem is None), None)
    best_label = min(singles, key=singles.get)
    chosen = sched.chosen
    return {"model": name, "npu_first_ms": singles.get("npu_emu first", singles.get("npu_emu only", float("nan"))) * 1e3,
            "onnxruntime_ms": singles.get("onnxruntime only", float("nan")) * 1e3,
            "numpy_ms": singles.get("numpy only", float("nan")) * 1e3,
            "per_node_ms": per_node * 1e3 if per_node is not None else float("nan"),
            "cost_ms": chosen.seconds * 1e3, "best_single": best_label, "best_single_ms": singles[best_label] * 1e3,
            "cost_plan": chosen.label, "ok": chosen.seconds <= singles[best_label] + 1e-12}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--models", default=",".join(LIGHT))
    ap.add_argument("--no-npu", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    cpu, npu = [], []
    print(f"{'model':<14}{'numpy ms':>10}{'ort ms':>10}{'cost ms':>10}{'ratio':>8}  {'plan':<18}{'parts':>6}"
          f"{'build s':>9}{'cached':>8}")
    for m in models:
        r = cpu_row(m, args.iters)
        cpu.append(r)
        print(f"{m:<14}{r['numpy_ms']:>10.2f}{r['onnxruntime_ms']:>10.2f}{r['cost_ms']:>10.2f}{r['ratio']:>8.3f}  "
              f"{r['cost_plan']:<18}{r['partitions']:>6}{r['build_s']:>9.1f}{r['rebuild_s']:>8.1f}", flush=True)
    if not args.no_npu:
        print(f"\nestimated ms  {'npu_emu+bk':>10}{'ort':>10}{'numpy':>10}{'per-node':>10}{'cost':>10}  "
              f"best single")
        for m in models:
            r = npu_row(m)
            npu.append(r)
            print(f"{m:<14}{r['npu_first_ms']:>10.3f}{r['onnxruntime_ms']:>10.2f}{r['numpy_ms']:>10.2f}"
                  f"{r['per_node_ms']:>10.3f}{r['cost_ms']:>10.3f}  {r['best_single']} "
                  f"({'ok' if r['ok'] else 'MISSED'})", flush=True)
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (timings are only comparable within one run)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu, "npu": npu, "load_average": load, "cores": os.cpu_count()}, f, indent=2)
    missed = [r["model"] for r in cpu if r["ratio"] > CPU_TARGET] + [r["model"] for r in npu if not r["ok"]]
    if missed:
        print(f"targets missed: {missed}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
