"""A cached measuring build against a cached build of the plan it chose, each in its own process.

    python benchmarks/bench_cached_choice.py [--models squeezenet,shufflenet] [--real [KEYS]]
                                             [--rounds 15] [--base DIR]

The issue's target: "a second process with the same cache_dir measures
nothing (build <= 1.1x a cached build)".  Per model (the light models with
He-initialized weights, ``--real``: the real models of
``benchmarks/real_models.py`` at their feeds' shapes, as in
``bench_measured.py``), once: a measuring build (``ScheduleConfig(cache_dir=A)``,
nothing else named) fills cache A, and the plan it chose, named
(``backends`` = its engines, ``scheduler="priority"``, its precision), fills
cache B.  Then, interleaved over ``--rounds`` rounds (order rotated), fresh
processes build

* ``cached``: the measuring config again, loading A;
* ``plan``: the named plan, loading B;

and print the build's wall seconds, the process CPU seconds it took, whether
it hit the cache, whether ``openvino`` was imported and which plugins were.
With ``--base DIR`` (another nnrt checkout, e.g. ``git worktree add
/tmp/base main``) the same is done for that tree (its own caches, kinds
``base:cached`` / ``base:plan``) in the same rounds.  Medians; ``x plan`` =
cached / plan (wall and CPU).  Children run with bytecode caching allowed,
as ``bench_measured.py`` (``--keep-env`` keeps the environment).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_cold_start import base_env  # noqa: E402
from bench_measured import WARM, light_specs, real_specs  # noqa: E402

#: the children's working folder: not a checkout (``python -c`` puts it first on sys.path, before --base's tree)
NEUTRAL_CWD = tempfile.gettempdir()

CHILD = r"""
import json, os, sys, time
root, spec, mode, cache = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, os.path.join(root, "examples")); sys.path.insert(0, os.path.join(root, "benchmarks"))
import onnx
if spec.get("real"):
    import real_models
    from pathlib import Path
    path, feeds = real_models.model_feeds(spec["real"], Path(spec["root"]))
    model = onnx.load(str(path))
    fixed = {"input_shapes": {k: list(v.shape) for k, v in feeds.items()}}
else:
    from light_weights import he_initialized
    model, fixed = he_initialized(onnx.load(spec["path"])), {}
data = model.SerializeToString()
from nnrt_core import ScheduleConfig, Session
from nnrt_core.registry import default_registry
cfg = (ScheduleConfig(backends=spec["plan"], scheduler="priority", precision=spec["precision"], cache_dir=cache, **fixed)
       if mode == "plan" else ScheduleConfig(cache_dir=cache, **fixed))
c0, t0 = time.process_time(), time.perf_counter()
s = Session(data, cfg)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print("RESULT " + json.dumps({"wall": wall, "cpu": cpu, "hit": bool(s.compiled_model.cache_hit),
      "plan": list(s.config.backends), "precision": s.config.precision, "openvino": "openvino" in sys.modules,
      "plugins": default_registry().loaded_plugins()}))
"""


def child(spec: dict, mode: str, cache: str, env: dict[str, str] | None) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), json.dumps(spec), mode, cache],
                          capture_output=True, text=True, timeout=900, env=env, cwd=NEUTRAL_CWD)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{mode} on {spec['name']} failed:\n{proc.stderr[-1500:]}")


def bench(spec: dict, rounds: int, envs: dict[str, dict[str, str] | None]) -> dict:
    """Fill the caches of every tree, then ``rounds`` interleaved rounds of cached / plan builds."""
    with tempfile.TemporaryDirectory() as folder:
        plans: dict[str, dict] = {}
        for tree, env in envs.items():
            caches = (os.path.join(folder, tree, "measured"), os.path.join(folder, tree, "plan"))
            first = child(spec, "measured", caches[0], env)
            plan = {**spec, "plan": first["plan"], "precision": first["precision"]}
            child(plan, "plan", caches[1], env)
            plans[tree] = {"spec": plan, "caches": caches, "chosen": first["plan"]}
        kinds = [(tree, mode) for tree in envs for mode in ("cached", "plan")]
        got: dict[tuple[str, str], list[dict]] = {k: [] for k in kinds}
        for r in range(rounds):
            for tree, mode in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                p = plans[tree]
                got[(tree, mode)].append(child(p["spec"], mode, p["caches"][mode == "plan"], envs[tree]))
    out = {"model": spec["name"], "trees": {}}
    for tree in envs:
        c, p = got[(tree, "cached")], got[(tree, "plan")]
        med = {f"{m}_{k}": statistics.median(x[k] for x in runs) for m, runs in (("cached", c), ("plan", p))
               for k in ("wall", "cpu")}
        out["trees"][tree] = {**med, "x_plan_wall": med["cached_wall"] / med["plan_wall"],
                              "x_plan_cpu": med["cached_cpu"] / med["plan_cpu"], "chosen": plans[tree]["chosen"],
                              "hits": sum(x["hit"] for x in c + p), "runs": len(c + p),
                              "openvino_cached": sum(x["openvino"] for x in c), "plugins_cached": c[-1]["plugins"]}
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="squeezenet,shufflenet")
    ap.add_argument("--real", nargs="?", const="", default=None, metavar="KEYS")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--base", type=Path, help="another nnrt checkout, timed in the same rounds")
    ap.add_argument("--keep-env", action="store_true", help="children keep PYTHONDONTWRITEBYTECODE if set")
    a = ap.parse_args(argv)
    env = dict(os.environ)
    if not a.keep_env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    envs: dict[str, dict[str, str] | None] = {"new": env}
    if a.base is not None:
        envs["base"] = base_env(env, a.base.resolve())
    for e in envs.values():
        subprocess.run([sys.executable, "-c", WARM], env=e, capture_output=True, timeout=300)  # bytecode written
    specs = light_specs([m for m in a.models.split(",") if m])
    if a.real is not None:
        specs += real_specs([w for w in a.real.split(",") if w], a.models_dir)
    print(f"load average {os.getloadavg()[0]:.1f} at start; medians over {a.rounds} rounds, one process each")
    print(f"{'model':<22}{'tree':<6}{'chosen':<14}{'cached ms':>10}{'plan ms':>9}{'x plan':>8}"
          f"{'cached cpu':>11}{'plan cpu':>9}{'x cpu':>7}  openvino imported (cached) / plugins")
    for spec in specs:
        try:
            row = bench(spec, a.rounds, envs)
        except RuntimeError as e:
            print(f"{spec['name']}: skipped: {str(e)[-300:]}", file=sys.stderr)
            continue
        for tree, t in row["trees"].items():
            print(f"{row['model']:<22}{tree:<6}{','.join(t['chosen']):<14}{t['cached_wall'] * 1e3:>10.1f}"
                  f"{t['plan_wall'] * 1e3:>9.1f}{t['x_plan_wall']:>8.3f}{t['cached_cpu'] * 1e3:>11.1f}"
                  f"{t['plan_cpu'] * 1e3:>9.1f}{t['x_plan_cpu']:>7.3f}  {t['openvino_cached']}/{a.rounds} "
                  f"{','.join(t['plugins_cached'])}" + ("" if t["hits"] == t["runs"] else "  MISSED THE CACHE"),
                  flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
