"""A/B the measuring build of two source trees against the plain build, fresh processes, interleaved.

    python benchmarks/ab/measured_build_ab.py --base DIR [--models squeezenet,inception_v1] [--real KEYS]
                                              [--rounds 8] [--models-dir DIR]

``bench_measured.py`` times seven sides per model, so on the shared 2-core
machine two rounds of it say little about a build-time change of 20 %.  This
script builds only what the target "measuring costs <= 3x a plain build"
compares, many times: per model and round, in fresh processes and in an
order rotated every round,

* ``base``: ``Session(model, ScheduleConfig(cache_dir=fresh))`` with the tree
  ``--base`` first on ``PYTHONPATH`` (its ``plugins/*`` and ``schedulers`` too);
* ``new``: the same with the tree this file is in;
* ``plain``: ``ScheduleConfig(backends=["onnxruntime"], scheduler="priority")``
  (no cache), this tree;

and prints per model the median build wall seconds, the process CPU seconds,
the median ``timing`` (the ``measure`` stage less the candidates' optimize,
place, compile and explain: first runs, timed runs and waits), the timed and
untimed runs and why the timing stopped (from the ``plan_measured`` event)
and the plan chosen; ``x plain`` = build / plain build.  Light models get
He-initialized weights and the real models (``benchmarks/real_models.py``)
their first-step feeds' shapes as ``input_shapes``, as in ``bench_measured.py``.
Children run with bytecode caching allowed (an untimed child imports every plugin of each tree first).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, re, sys, time
root, kind, spec, cache = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
sys.path.insert(0, os.path.join(root, "examples")); sys.path.insert(0, os.path.join(root, "benchmarks"))
import onnx
if spec.get("real"):
    import real_models
    from pathlib import Path
    path, feeds = real_models.model_feeds(spec["real"], Path(spec["root"]))
    data = onnx.load(str(path)).SerializeToString()
    fixed = {"input_shapes": {k: list(v.shape) for k, v in feeds.items()}}
else:
    from light_weights import he_initialized
    data = he_initialized(onnx.load(spec["path"])).SerializeToString()
    fixed = {}
from nnrt_core import ScheduleConfig, Session
cfg = (ScheduleConfig(backends=["onnxruntime"], scheduler="priority", **fixed) if kind == "plain"
       else ScheduleConfig(cache_dir=cache, **fixed))
c0, t0 = time.process_time(), time.perf_counter()
s = Session(data, cfg)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
st = s.stats()["build"]
inner = sum(v for k, v in st.items() if k in ("optimize", "place", "explain") or k.startswith("compile:"))
msg = next((e.message for e in s.events if e.kind == "plan_measured"), "")
m = re.search(r"timed in (\d+) round\(s\), stopped: ([a-z ]+)", msg)
runs = re.search(r"(\d+) timed and (\d+) untimed", msg)
timing = st.get("measure", 0.0) - inner if "measure" in st else 0.0
print("RESULT " + json.dumps({"wall": wall, "cpu": cpu, "timing": timing,
      "stages": st, "stop": (m.group(2) + f" r{m.group(1)}") if m else "", "runs": (runs.group(0) if runs else ""),
      "chosen": ",".join(sorted({p.backend for p in s.partitions}))}))
"""

WARM = "from nnrt_core.registry import default_registry; default_registry().load_all(); import onnxruntime, onnx"


def _env(tree: Path) -> dict[str, str]:
    dirs = [tree, *sorted((tree / "plugins").glob("*")), tree / "schedulers"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(str(d) for d in dirs if d.is_dir())
    return env


def _child(tree: Path, kind: str, spec: dict, cache: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), kind, json.dumps(spec), cache],
                          capture_output=True, text=True, timeout=600, env=_env(tree))
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{kind} on {spec['name']} failed:\n{proc.stderr[-1500:]}")


def specs(models: str, real: str | None, models_dir: str | None) -> list[dict]:
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    out = [{"name": m, "path": str(light / f"light_{m}.onnx")} for m in models.split(",") if m]
    if real:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import real_models

        root = real_models.models_dir(models_dir)
        for s in real_models.SPECS:
            if any(w in s.key for w in real.split(",")) and real_models.model_path(root, s) is not None:
                out.append({"name": s.key, "real": s.key, "root": str(root)})
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--models", default="squeezenet,inception_v1")
    ap.add_argument("--real", default=None)
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--rounds", type=int, default=8)
    a = ap.parse_args(argv)
    trees = {"base": a.base.resolve(), "new": ROOT, "plain": ROOT}
    for tree in {a.base.resolve(), ROOT}:
        subprocess.run([sys.executable, "-c", WARM], env=_env(tree), capture_output=True, timeout=300)
    print(f"load average {os.getloadavg()[0]:.1f}; {a.rounds} rounds, fresh processes, order rotated per round")
    print(f"{'model':<22}{'kind':<6}{'wall s':>8}{'cpu s':>7}{'x plain':>8}{'timing':>8}  stops / runs / chosen")
    ratios: dict[str, list[float]] = {"base": [], "new": []}
    for spec in specs(a.models, a.real, a.models_dir):
        got: dict[str, list[dict]] = {k: [] for k in trees}
        kinds = list(trees)
        for r in range(a.rounds):
            for kind in kinds[r % 3:] + kinds[:r % 3]:
                with tempfile.TemporaryDirectory() as cache:
                    got[kind].append(_child(trees[kind], kind, spec, cache))
        plain = statistics.median(x["wall"] for x in got["plain"])
        for kind in kinds:
            wall = statistics.median(x["wall"] for x in got[kind])
            cpu = statistics.median(x["cpu"] for x in got[kind])
            timing = statistics.median(x["timing"] for x in got[kind])
            if kind != "plain":
                ratios[kind].append(wall / plain)
            stops = sorted({x["stop"] for x in got[kind] if x["stop"]})
            runs = sorted({re.sub(r" and ", "+", x["runs"]).replace(" untimed", "") for x in got[kind] if x["runs"]})
            chosen = sorted({x["chosen"] for x in got[kind]})
            print(f"{spec['name']:<22}{kind:<6}{wall:>8.3f}{cpu:>7.3f}{wall / plain:>8.2f}{timing:>8.3f}  "
                  f"{'; '.join(stops)} / {', '.join(runs)} / {', '.join(chosen)}", flush=True)
    for kind, vals in ratios.items():
        if vals:
            g = statistics.geometric_mean(vals)
            print(f"{kind}: build x plain geomean {g:.2f}, worst {max(vals):.2f} ({len(vals)} models)")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
