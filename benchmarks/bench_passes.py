"""What the graph passes buy: NumPy-backend latency per optimization level.

    python benchmarks/bench_passes.py [--runs N] [--models a,b] [--levels none,fold,basic,all] [--json]

For every onnx `light` model it builds one session per level (backend
``numpy``), checks they agree, then times them interleaved (one run of each
level per round, so machine load hits all levels alike) and reports per-level
median latency, node count, build time and the speed-up over the first level.
The pseudo-level ``fold`` is constant folding alone (what ``basic`` did before
the pass manager), to show what the other passes add.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends import load_onnx
from nnrt_core.passes import fold_constants
from nnrt_core.registry import default_registry

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def make_session(path: Path, level: str) -> Session:
    if level != "fold":
        return Session(path, ScheduleConfig(backends=["numpy"], optimization_level=level))
    model = load_onnx(path)
    model.graph.topological_sort()
    fold_constants(model.graph, default_registry().backend("numpy").backend)
    return Session(model, ScheduleConfig(backends=["numpy"], optimization_level="none"))


def bench_model(name: str, levels: list[str], runs: int) -> dict:
    path = LIGHT / f"light_{name}.onnx"
    sessions, builds = {}, {}
    for level in levels:
        t0 = time.perf_counter()
        sessions[level] = make_session(path, level)
        builds[level] = time.perf_counter() - t0
    inp = sessions[levels[0]].inputs[0]
    feeds = {inp.name: np.random.default_rng(0).random(tuple(inp.shape), dtype=np.float32)}
    outs = {lvl: list(s.run(feeds).values())[0] for lvl, s in sessions.items()}  # also the warm-up
    ref = outs[levels[0]]
    times: dict[str, list[float]] = {lvl: [] for lvl in levels}
    for _ in range(runs):
        for lvl, s in sessions.items():
            t0 = time.perf_counter()
            s.run(feeds)
            times[lvl].append(time.perf_counter() - t0)
    row = {"model": name, "levels": {}}
    base = statistics.median(times[levels[0]])
    for lvl, s in sessions.items():
        med = statistics.median(times[lvl])
        row["levels"][lvl] = {
            "nodes": len(s.placement), "ms": med * 1e3, "speedup": base / med, "build_s": builds[lvl],
            "max_abs_diff": float(np.max(np.abs(outs[lvl] - ref))),
            "rewrites": s.stats()["passes"]["rewrites"],
        }
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--levels", default="none,fold,basic,all")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    levels = args.levels.split(",")
    rows = []
    if not args.json:
        head = "".join(f"{lvl + ' nodes':>12}{lvl + ' ms':>11}" for lvl in levels)
        print(f"{'model':<14}{head}" + "".join(f"{'x ' + lvl:>10}" for lvl in levels[1:]), flush=True)
    for name in args.models.split(","):
        row = bench_model(name, levels, args.runs)
        rows.append(row)
        if not args.json:
            cells = "".join(f"{row['levels'][lvl]['nodes']:>12}{row['levels'][lvl]['ms']:>11.1f}" for lvl in levels)
            gains = "".join(f"{row['levels'][lvl]['speedup']:>10.2f}" for lvl in levels[1:])
            print(f"{name:<14}{cells}{gains}", flush=True)
    geo = {lvl: float(np.exp(np.mean([np.log(r["levels"][lvl]["speedup"]) for r in rows]))) for lvl in levels}
    if args.json:
        print(json.dumps({"runs": args.runs, "models": rows, "geomean_speedup": geo}, indent=2))
    else:
        print("geometric-mean speed-up over " + levels[0] + ": "
              + ", ".join(f"{lvl} x{geo[lvl]:.2f}" for lvl in levels[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
