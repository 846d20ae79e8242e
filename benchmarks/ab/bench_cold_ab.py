"""Cold start of this source tree against another one (A/B), interleaved in
fresh processes: time to first inference per backend and ``nnrt --help``.

    python benchmarks/ab/bench_cold_ab.py --base DIR [--rounds 7] [--kinds onnxruntime,numpy] [--model mobile]

``DIR`` is another source tree (e.g. ``git archive main`` unpacked); each
side runs with its tree (and plugin folders) first on ``PYTHONPATH`` and as
the working directory.  Per round the sides and kinds run in rotating order,
so machine load hits both alike.  The child is ``bench_cold_start.py``'s:
``import numpy`` + ``from nnrt_core import Session`` + ``Session(path,
ScheduleConfig(backends=[kind]))`` + first run, and ``cpu`` is the main
thread's CPU time over that span (``time.thread_time``; less disturbed by
other load than wall time).  ``help`` is ``python -m nnrt_core.tools.cli
--help`` (wall, whole process).  Prints medians, this/base ratios and the load
average before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: the shared benchmark modules
from bench_cold_start import CHILD, child_env, models, result_of  # noqa: E402
from cold_start_breakdown import tree_env  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root


def cold_start(tree: str, env: dict[str, str], kind: str, model: dict) -> dict:
    """One fresh process of ``kind`` on ``model`` with ``tree``'s nnrt."""
    args = [sys.executable, "-c", CHILD, kind, str(model["path"]), model["input"],
            ",".join(map(str, model["shape"])), "1"]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tree)
    return result_of(proc, f"{kind} (tree {tree})")


def help_seconds(tree: str, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nnrt_core.tools.cli", "--help"], capture_output=True, env=env,
                   cwd=tree, check=True)
    return time.perf_counter() - t0


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other source tree")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kinds", default="onnxruntime,numpy", help="nnrt backends to start (and 'help')")
    ap.add_argument("--model", default="mobile", choices=["mobile", "light"])
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    (model,) = models([args.model], args.batch) or [None]
    if model is None:
        raise SystemExit("model not found")
    base = os.path.abspath(args.base)
    env = child_env(False)
    trees = {"this": (ROOT, tree_env(env, ROOT)), "base": (base, tree_env(env, base))}
    jobs = [(side, kind) for kind in args.kinds.split(",") + ["help"] for side in trees]
    print(f"load average before: {load()}")

    def one(side: str, kind: str) -> dict:
        tree, tenv = trees[side]
        if kind == "help":
            return {"total": help_seconds(tree, tenv)}
        return cold_start(tree, tenv, kind, model)

    for side, kind in jobs:
        one(side, kind)  # warm-up: byte-code caches, page cache
    rows: dict[tuple[str, str], list[dict]] = {j: [] for j in jobs}
    for r in range(args.rounds):
        for job in jobs[r % len(jobs):] + jobs[:r % len(jobs)]:
            rows[job].append(one(*job))
    print(f"{model['key']}: medians of {args.rounds} fresh processes per side, ms; load average after: {load()}")
    print(f"  {'kind':12s} {'metric':8s} {'this':>8s} {'base':>8s} {'this/base':>9s}")
    for kind in args.kinds.split(",") + ["help"]:
        for metric in (["total"] if kind == "help" else ["cpu", "import", "build", "total"]):
            a = statistics.median(x[metric] for x in rows[("this", kind)]) * 1e3
            b = statistics.median(x[metric] for x in rows[("base", kind)]) * 1e3
            print(f"  {kind:12s} {metric:8s} {a:8.1f} {b:8.1f} {a / b:9.3f}")


if __name__ == "__main__":
    main()
