"""A/B session build time of two source trees, interleaved model by model.

    python benchmarks/ab/bench_build_ab.py --base /work/main [--rounds 3] [--runs 3]
        [--models "/tmp/tflite_models/**/*.tflite"] [--only face,pose] [--no-collect] [--json]

On a shared machine the load moves build times by tens of percent between
two runs of a benchmark, which hides changes of a few percent.  This script
keeps one worker process per tree alive (``--base``, and the tree this file
is in), each with its own ``PYTHONPATH`` (the tree, its ``plugins/numpy``
and ``schedulers``), and asks them in turn, model by model and round by round
(the order flips every round), for ``--runs`` builds of
``Session(path, ScheduleConfig(backends=["numpy"]))`` and ``load_model(path)``
in process CPU time.  Both trees see the same load.  Per model it prints the
minimum over all rounds (the figure least disturbed by other load) and the
median, for the build and for the import, with the change from base to this
tree.  The summary line gives the median change over all models.
Models that fail to build in either tree are left out.

Each build starts after a ``gc.collect()`` by default, so the collections a
build leaves behind are not charged to it.  ``--no-collect`` runs the builds
back to back as an application would, each paying what its predecessors
left; then compare the mean (printed last), which includes the occasional
full collection.
"""
from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]  # the repository root
DEFAULT_MODELS = "/tmp/tflite_models/**/*.tflite"


def _worker() -> None:
    """Answer ``path<TAB>runs`` lines with JSON [[build CPU s...], [load CPU s...]] or null."""
    import logging
    logging.disable(logging.WARNING)
    from nnrt_core import ScheduleConfig, Session
    from nnrt_core.compiler.load import load_model
    from nnrt_core.errors import NnrtError
    cfg = ScheduleConfig(backends=["numpy"])
    for line in sys.stdin:
        path, runs, collect = line.rstrip("\n").split("\t")
        try:
            Session(path, cfg)  # warm: imports, plugin loading, first-call caches
        except (NnrtError, RuntimeError, ValueError):
            print("null", flush=True)
            continue
        builds, loads = [], []
        for _ in range(int(runs)):
            if collect == "1":
                gc.collect()
            t = time.process_time()
            Session(path, cfg)
            builds.append(time.process_time() - t)
            if collect == "1":
                gc.collect()
            t = time.process_time()
            load_model(path)
            loads.append(time.process_time() - t)
        print(json.dumps([builds, loads]), flush=True)


class _Tree:
    """A worker process running this script's ``--worker`` against one source tree."""

    def __init__(self, root: Path, collect: bool = True) -> None:
        self.collect = "1" if collect else "0"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(str(root / p) for p in ("", "plugins/numpy", "schedulers"))
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def measure(self, path: str, runs: int) -> list | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{path}\t{runs}\t{self.collect}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with {self.proc.wait()}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


def compare(base: Path, paths: list[str], rounds: int, runs: int,
            collect: bool = True) -> tuple[list[dict], list[float]]:
    trees = {"base": _Tree(base, collect), "this": _Tree(HERE, collect)}
    got: dict[str, dict[str, list]] = {}
    loads = []
    try:
        for r in range(rounds):
            loads.append(os.getloadavg()[0])
            order = ("base", "this") if r % 2 == 0 else ("this", "base")
            for p in paths:
                for name in order:
                    v = trees[name].measure(p, runs)
                    got.setdefault(p, {}).setdefault(name, []).append(v)
    finally:
        for t in trees.values():
            t.close()
    rows = []
    for p, d in got.items():
        if any(v is None for vs in d.values() for v in vs):
            continue
        row = {"model": p}
        for name in ("base", "this"):
            builds = [x * 1e3 for v in d[name] for x in v[0]]
            imports = [x * 1e3 for v in d[name] for x in v[1]]
            row[name] = {"build_min_ms": min(builds), "build_median_ms": statistics.median(builds),
                         "build_mean_ms": statistics.mean(builds),
                         "import_min_ms": min(imports), "import_median_ms": statistics.median(imports)}
        rows.append(row)
    return rows, loads


def main() -> int:
    if "--worker" in sys.argv:
        _worker()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="root of the other source tree (e.g. a main checkout)")
    ap.add_argument("--models", default=DEFAULT_MODELS, help="glob of model files (recursive **)")
    ap.add_argument("--only", default="", help="comma-separated substrings of model paths to keep")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3, help="builds per model per round and tree")
    ap.add_argument("--no-collect", action="store_true",
                    help="no gc.collect() before each build: builds run back to back, each paying the "
                         "collections the ones before it left (as in an application); compare means")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    paths = sorted(glob.glob(args.models, recursive=True))
    if args.only:
        paths = [p for p in paths if any(s in p for s in args.only.split(","))]
    if not paths:
        print(f"no models match {args.models!r}", file=sys.stderr)
        return 1
    rows, loads = compare(Path(args.base).resolve(), paths, args.rounds, args.runs, not args.no_collect)
    if args.json:
        print(json.dumps({"load_averages": loads, "rows": rows}, indent=2))
        return 0
    print(f"{'model':44}{'build min ms':>22}{'change':>8}{'build median ms':>22}{'import min ms':>22}{'change':>8}")
    for r in rows:
        b, t = r["base"], r["this"]
        name = f"{Path(r['model']).parent.name}/{Path(r['model']).name}"
        print(f"{name[-43:]:44}{b['build_min_ms']:10.2f} ->{t['build_min_ms']:9.2f}"
              f"{t['build_min_ms'] / b['build_min_ms'] - 1:+8.1%}"
              f"{b['build_median_ms']:10.2f} ->{t['build_median_ms']:9.2f}"
              f"{b['import_min_ms']:10.2f} ->{t['import_min_ms']:9.2f}"
              f"{t['import_min_ms'] / b['import_min_ms'] - 1:+8.1%}")
    if rows:
        change = statistics.median(r["this"]["build_min_ms"] / r["base"]["build_min_ms"] for r in rows) - 1
        imp = statistics.median(r["this"]["import_min_ms"] / r["base"]["import_min_ms"] for r in rows) - 1
        print(f"median change over {len(rows)} models (this tree vs {args.base}, minimum CPU time): "
              f"build {change:+.1%}, import {imp:+.1%}; load averages per round: "
              f"{', '.join(f'{x:.1f}' for x in loads)}")
        mean = statistics.median(r["this"]["build_mean_ms"] / r["base"]["build_mean_ms"] for r in rows) - 1
        print(f"median change of the mean build CPU time: {mean:+.1%}"
              + (" (builds back to back, no gc.collect() between: GC work included)" if args.no_collect else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
