"""Measured selection against the raw engines, each side in its own process.

    python benchmarks/bench_measured.py [--rounds 3] [--runs 20] [--models squeezenet,resnet50 | --all] [PATH.onnx ...]

Per model (the onnx wheel's light models with He-initialized weights, or the
``.onnx`` files given), every side runs in a fresh process, the sides
interleaved round by round (their thread pools never share a process):

* ``raw_ort``: an ``onnxruntime.InferenceSession`` with default options;
* ``raw_ov``: OpenVINO's ``Core().compile_model`` on the CPU with
  ``INFERENCE_PRECISION_HINT=f32`` (when openvino is installed);
* ``nnrt``: ``Session(model, ScheduleConfig(cache_dir=fresh))``: no backend or
  scheduler named, so nnrt measures when two or more real engines are installed;
* ``nnrt_cached``: the same config in a new process with the cache ``nnrt``
  filled: it loads the stored choice and measures nothing;
* ``nnrt_plain``: ``ScheduleConfig(backends=["onnxruntime"], scheduler="priority")``,
  the plain build the measuring build is compared with.

Each child prints its build seconds, the median of ``--runs`` runs and its
outputs' digest; the parent prints medians over the rounds and the ratios:
latency nnrt / raw ORT and nnrt / the best raw engine, build nnrt / plain and
cached / plain, and the largest relative difference of nnrt's outputs from
raw ORT's.  The geometric mean of each ratio closes the table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIGHT_MODELS = ["squeezenet", "resnet50", "inception_v1", "inception_v2", "densenet121", "shufflenet",
                "zfnet512", "bvlc_alexnet", "vgg19"]

CHILD = r'''
import json, os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(sys.argv[1], "examples"))
side, path, runs, cache = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
import onnx
model = onnx.load(path)
if "/light/" in path:
    from light_weights import he_initialized
    model = he_initialized(model)
data = model.SerializeToString()
rng = np.random.default_rng(0)
def shape(vi):
    return tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
inits = {t.name for t in model.graph.initializer}
feeds = {vi.name: rng.standard_normal(shape(vi)).astype(np.float32) for vi in model.graph.input if vi.name not in inits}
t0 = time.perf_counter()
if side == "raw_ort":
    import onnxruntime as ort
    s = ort.InferenceSession(data)
    names = [o.name for o in s.get_outputs()]
    run = lambda: dict(zip(names, s.run(None, feeds)))
elif side == "raw_ov":
    import openvino as ov
    core = ov.Core()
    c = core.compile_model(core.read_model(data, b""), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    req = c.create_infer_request()
    names = [o.get_any_name() for o in c.outputs]
    run = lambda: {n: np.array(req.infer(feeds)[i]) for i, n in enumerate(names)}
else:
    from nnrt_core import ScheduleConfig, Session
    cfg = (ScheduleConfig(backends=["onnxruntime"], scheduler="priority") if side == "nnrt_plain"
           else ScheduleConfig(cache_dir=cache))
    s = Session(data, cfg)
    run = lambda: s.run(feeds)
build = time.perf_counter() - t0
out = run()
times = []
for _ in range(runs):
    t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
res = {"build": build, "median": float(np.median(times)),
       "outputs": {k: np.asarray(v, np.float64).ravel()[:4096].tolist() for k, v in out.items()}}
if side.startswith("nnrt") and side != "nnrt_plain":
    res["chosen"] = ", ".join(sorted({p.backend for p in s.partitions})) + f" ({s.config.precision})"
    res["cache_hit"] = bool(s.compiled_model.cache_hit)
print("RESULT " + json.dumps(res))
'''


def _child(side: str, path: Path, runs: int, cache: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), side, str(path), str(runs), cache],
                          capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{side} on {path.name} failed:\n{proc.stderr[-2000:]}")


def _rel_err(a: dict, b: dict) -> float:
    worst = 0.0
    for k, ref in b.items():
        got = a.get(k)
        if got is None or len(got) != len(ref):
            return float("inf")
        scale = max(abs(x) for x in ref) or 1.0
        worst = max(worst, max(abs(x - y) for x, y in zip(got, ref)) / scale)
    return worst


def bench(path: Path, rounds: int, runs: int, with_ov: bool) -> dict:
    sides = ["raw_ort"] + (["raw_ov"] if with_ov else []) + ["nnrt_plain", "nnrt", "nnrt_cached"]
    got: dict[str, list[dict]] = {s: [] for s in sides}
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as cache:  # a fresh cache per round: nnrt measures, nnrt_cached loads
            base, pair = sides[:-2], sides[-2:]  # nnrt_cached loads what nnrt stored: always right after it
            for side in (base + pair if r % 2 == 0 else pair + base[::-1]):
                got[side].append(_child(side, path, runs, cache))
    med = {s: statistics.median(x["median"] for x in got[s]) for s in sides}
    build = {s: statistics.median(x["build"] for x in got[s]) for s in sides}
    raw_best = min(med["raw_ort"], med.get("raw_ov", math.inf))
    return {"model": path.stem, "ms": {s: med[s] * 1e3 for s in sides},
            "vs_ort": med["nnrt"] / med["raw_ort"], "vs_best": med["nnrt"] / raw_best,
            "build_vs_plain": build["nnrt"] / build["nnrt_plain"],
            "cached_vs_plain": build["nnrt_cached"] / build["nnrt_plain"],
            "rel_err": _rel_err(got["nnrt"][0]["outputs"], got["raw_ort"][0]["outputs"]),
            "chosen": got["nnrt"][-1].get("chosen"),
            "cache_hits": sum(bool(x.get("cache_hit")) for x in got["nnrt_cached"]), "rounds": rounds}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--models", default="squeezenet,resnet50")
    ap.add_argument("--all", action="store_true", help="every light model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    names = LIGHT_MODELS if a.all else [m for m in a.models.split(",") if m]
    paths = a.paths or [light / f"light_{m}.onnx" for m in names]
    try:
        import openvino  # noqa: F401
        with_ov = True
    except ImportError:
        with_ov = False
    rows = [bench(p, a.rounds, a.runs, with_ov) for p in paths]
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"load average {os.getloadavg()[0]:.1f}; medians over {a.rounds} rounds of {a.runs} runs, one process each")
    print(f"{'model':<20}{'raw ORT ms':>11}{'raw OV ms':>10}{'nnrt ms':>9}{'x ORT':>7}{'x best':>7}"
          f"{'build x':>8}{'cached x':>9}{'rel err':>9}  chosen")
    for r in rows:
        ov = r["ms"].get("raw_ov")
        print(f"{r['model']:<20}{r['ms']['raw_ort']:>11.2f}{(f'{ov:.2f}' if ov else '-'):>10}{r['ms']['nnrt']:>9.2f}"
              f"{r['vs_ort']:>7.3f}{r['vs_best']:>7.3f}{r['build_vs_plain']:>8.2f}{r['cached_vs_plain']:>9.2f}"
              f"{r['rel_err']:>9.1e}  {r['chosen']}")
    geo = {k: math.exp(statistics.fmean(math.log(r[k]) for r in rows))
           for k in ("vs_ort", "vs_best", "build_vs_plain", "cached_vs_plain")}
    print("geomean: " + ", ".join(f"{k} {v:.3f}" for k, v in geo.items()))
    missed = [r["model"] for r in rows if r["cache_hits"] != r["rounds"]]
    if missed:
        print(f"WARNING: nnrt_cached did not load the cache on {missed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
