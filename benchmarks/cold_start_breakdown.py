"""Where time to first inference goes, step by step, in fresh processes:
raw ONNX Runtime against nnrt on the ONNX Runtime backend.

    python benchmarks/cold_start_breakdown.py [--rounds 5] [--model mobile|light] [--batch 8] [--base DIR] [--cache DIR]

Each child imports in a fixed order and times every step with the main
thread's CPU time (``time.thread_time``, which other load on a shared
machine disturbs less than wall time) and wall time:

* raw ORT: ``import numpy``, ``import onnxruntime``, ``InferenceSession``,
  first ``run``;
* nnrt: ``import numpy``, ``import onnxruntime`` (imported first here so that
  it is not counted as nnrt's), ``from nnrt_core import Session,
  ScheduleConfig`` and the modules that ``Session(...)`` imports, the build
  stages of ``Session.stats()["build"]`` (wall), first ``run``; plus which of
  ``onnx`` (the package), ``onnx.onnx_cpp2py_export`` (its extension, which
  nnrt loads by path without the package), protobuf, ``ml_dtypes``,
  ``nnrt_numpy`` and SciPy ended up imported.

``--cache DIR`` builds the nnrt sides with the model cache
(``ScheduleConfig(cache_dir=DIR/<side>)``, filled by each side's warm-up
child), so every timed child is a cache hit: the time to first inference of
a model compiled once before.

``--base DIR`` adds a third side: nnrt from another source tree (``DIR``
and its plugin folders on ``PYTHONPATH``, e.g. ``git archive main`` unpacked
somewhere), so that an A/B comparison runs under the same machine load.
Medians of ``--rounds`` children per side, interleaved; byte-code caches as
in ``bench_cold_start.py`` (``PYTHONPYCACHEPREFIX``, one warm-up child per
side).  The difference per step is what nnrt adds on top of ONNX Runtime.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from bench_cold_start import child_env, models, result_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import sys, time, json
side, path, name, shape = sys.argv[1], sys.argv[2], sys.argv[3], [int(d) for d in sys.argv[4].split(",")]
cache = sys.argv[5] if len(sys.argv) > 5 else None
steps = []
def mark(label, _t=[time.perf_counter(), time.thread_time()]):
    w, c = time.perf_counter(), time.thread_time()
    steps.append((label, c - _t[1], w - _t[0]))
    _t[0], _t[1] = w, c
import numpy as np
mark("import numpy")
import onnxruntime as ort
mark("import onnxruntime")
feeds = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
if side == "ort":
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    mark("session")
    sess.run(None, feeds)
    mark("first run")
    stages = {}
else:
    had_onnx = "onnx" in sys.modules
    from nnrt_core import ScheduleConfig, Session
    import nnrt_core.session
    mark("import nnrt_core (+Session)")
    sess = Session(path, ScheduleConfig(backends=["onnxruntime"], cache_dir=cache))
    mark("session")
    sess.run(feeds)
    mark("first run")
    stages = sess.stats()["build"]
mods = {m: m in sys.modules for m in ("onnx", "onnx.onnx_cpp2py_export", "google.protobuf", "ml_dtypes", "nnrt_numpy",
                                      "scipy")}
n_nnrt = sum(1 for m in sys.modules if m.startswith("nnrt"))
print("RESULT " + json.dumps({"steps": steps, "stages": stages, "modules": mods, "n_nnrt": n_nnrt}))
"""


def tree_env(env: dict[str, str], tree: str) -> dict[str, str]:
    """``env`` with ``tree`` (and its plugin folders) first on ``PYTHONPATH``."""
    parts = [tree] + [os.path.join(tree, d) for d in ("plugins/numpy", "plugins/npu_emu", "plugins/onnxruntime",
                                                      "schedulers", "plugins/ray")]
    return {**env, "PYTHONPATH": os.pathsep.join(parts)}


def run_child(side: str, model: dict, env: dict[str, str], cwd: str = ROOT, cache: str | None = None) -> dict:
    """One fresh process; ``cwd`` is the source tree (``-c`` puts it first on ``sys.path``);
    ``cache``: the nnrt side's model-cache folder."""
    args = [sys.executable, "-c", CHILD, side, str(model["path"]), model["input"], ",".join(map(str, model["shape"]))]
    args += [cache] if cache else []
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd)
    return result_of(proc, side)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--model", default="mobile", choices=["mobile", "light"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--keep-env", action="store_true")
    ap.add_argument("--base", help="another source tree run as a third, interleaved side (A/B)")
    ap.add_argument("--cache", help="model-cache folder for the nnrt sides (each timed child a cache hit)")
    args = ap.parse_args()
    env = child_env(args.keep_env)
    (model,) = models([args.model], args.batch) or [None]
    if model is None:
        raise SystemExit("model not found")
    sides = ["ort", "nnrt"] + (["base"] if args.base else [])
    envs = {"ort": env, "nnrt": env, "base": tree_env(env, args.base) if args.base else env}
    cwds = {"ort": ROOT, "nnrt": ROOT, "base": args.base or ROOT}
    caches = {s: (os.path.join(args.cache, s) if args.cache and s != "ort" else None) for s in sides}
    names = {"ort": "raw ORT", "nnrt": "nnrt onnxruntime" + (" (this tree)" if args.base else ""),
             "base": f"nnrt onnxruntime (base {args.base})"}
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for side in sides:
        run_child("ort" if side == "ort" else "nnrt", model, envs[side], cwds[side], caches[side])  # warm-up
    rows: dict[str, list[dict]] = {s: [] for s in sides}
    for r in range(args.rounds):
        for side in sides[r % len(sides):] + sides[:r % len(sides)]:
            rows[side].append(run_child("ort" if side == "ort" else "nnrt", model, envs[side], cwds[side],
                                        caches[side]))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{model['key']}: medians of {args.rounds} fresh processes, ms (cpu = main thread CPU time); "
          f"load average at the end {load}")
    ort_cpu = ort_wall = 0.0
    for side in sides:
        print(f"  {names[side]}")
        labels = [s[0] for s in rows[side][0]["steps"]]
        tot_c = tot_w = 0.0
        for i, label in enumerate(labels):
            c = statistics.median(r["steps"][i][1] for r in rows[side]) * 1e3
            w = statistics.median(r["steps"][i][2] for r in rows[side]) * 1e3
            tot_c, tot_w = tot_c + c, tot_w + w
            print(f"    {label:30s} cpu {c:7.1f}  wall {w:7.1f}")
        if side == "ort":
            ort_cpu, ort_wall = tot_c, tot_w
        print(f"    {'total (sum of medians)':30s} cpu {tot_c:7.1f}  wall {tot_w:7.1f}   "
              f"x ORT: cpu {tot_c / ort_cpu:.2f}  wall {tot_w / ort_wall:.2f}")
        if side != "ort":
            st = rows[side][0]["stages"]
            print("    build stages (wall): " + ", ".join(
                f"{k} {statistics.median(r['stages'].get(k, 0.0) for r in rows[side]) * 1e3:.1f}" for k in st))
            print(f"    imported: {rows[side][0]['modules']}, nnrt modules: {rows[side][0]['n_nnrt']}")
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
