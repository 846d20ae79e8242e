"""Measured selection against the raw engines, each side in its own process.

    python benchmarks/bench_measured.py [--rounds 3] [--runs 20] [--models squeezenet,resnet50]
                                        [--real [KEYS]] [--models-dir DIR] [--all] [--stages] [--measure-feeds]
                                        [PATH.onnx ...]

Models: the onnx wheel's light models with He-initialized weights
(``--models``, random-normal feeds), the real models of
``benchmarks/real_models.py`` (``--real``, optionally only keys containing
one of the comma-separated KEYS; fed real_models' first-step feeds: images,
audio, int64 tokens; a model not under ``--models-dir`` is skipped with a
line; ``python benchmarks/real_models.py --download`` fetches them), both
(``--all``), or the ``.onnx`` files given.  Every side runs in a fresh
process, the sides interleaved round by round (their thread pools never
share a process):

* ``raw_ort``: an ``onnxruntime.InferenceSession`` with default options;
* ``raw_ov``: OpenVINO's ``Core().compile_model`` on the CPU with
  ``INFERENCE_PRECISION_HINT=f32`` and ``DYNAMIC_QUANTIZATION_GROUP_SIZE=0`` (fp32
  throughout, as nnrt asks) (when openvino is installed); a model with
  free input dimensions is first reshaped to the feeds' shapes, as an
  OpenVINO user would;
* ``nnrt``: ``Session(model, ScheduleConfig(cache_dir=fresh))``: no backend or
  scheduler named, so nnrt measures when two or more real engines are
  installed (real models: with ``input_shapes`` = the feeds' shapes, so the
  plans are timed on them; with ``--measure-feeds`` also ``measure_feeds`` =
  the feeds, so the plans are timed on them, not on synthetic inputs);
* ``nnrt_cached``: the same config in a new process with the cache ``nnrt``
  filled: it loads the stored choice and measures nothing;
* ``nnrt_plain``: ``ScheduleConfig(backends=["onnxruntime"], scheduler="priority")``,
  the plain build the measuring build is compared with;
* ``plan_fill`` then ``plan_cached``: the plan ``nnrt`` chose, named
  (``backends`` = its engines, ``scheduler="priority"``, its precision), built
  in a new process with another fresh cache and loaded from it in a third:
  ``plan_cached`` is the cached build of the same plan that ``nnrt_cached``
  is compared with (``cached x plan``).

Children run with bytecode caching allowed (``PYTHONDONTWRITEBYTECODE``
removed from their environment; an untimed child first imports every
plugin), as in an installed nnrt: with it set, every child compiles nnrt's
and the plugins' sources again, which costs the measuring side, importing
more modules, the most.  ``--keep-env`` keeps the environment as it is.

Each child prints its build seconds, the median of ``--runs`` runs and at
least ``--min-time`` seconds of them (no more than ~3 s, at least 5 runs: a
sub-millisecond model's first runs after its build are up to 2x its steady
run in either side) and its outputs' digest; the parent
prints medians over the rounds and the ratios: latency nnrt / raw ORT, nnrt /
the best raw engine (``plain ms``: nnrt's ORT-only plan, in a process
with no other engine), best raw engine / raw ORT (``best/ORT``: what picking a
whole-model engine can reach), build nnrt / plain and cached / plain, and the
largest relative difference of nnrt's outputs from raw ORT's.  Geometric means
close the table, over the light models, the real ones and both.  ``--stages``
adds where the measuring and the plain builds spent their time, stage by stage
(``Session.stats()["build"]``, medians over the rounds).
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

CHILD = r"""
import json, os, sys, time
import numpy as np
root, side, spec, runs, cache = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
MIN_TIME = float(sys.argv[6])
sys.path.insert(0, os.path.join(root, "examples"))
sys.path.insert(0, os.path.join(root, "benchmarks"))
import onnx
path = spec["path"]
if spec.get("real"):  # a real model: real_models.py's first-step feeds (int64 tokens, images, audio...)
    import real_models
    from pathlib import Path
    path, feeds = real_models.model_feeds(spec["real"], Path(spec["root"]))
    path = str(path)
    model = onnx.load(path)
else:
    model = onnx.load(path)
    if "/light/" in path:
        from light_weights import he_initialized
        model = he_initialized(model)
    rng = np.random.default_rng(0)
    def shape(vi):
        return tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
    inits = {t.name for t in model.graph.initializer}
    feeds = {vi.name: rng.standard_normal(shape(vi)).astype(np.float32)
             for vi in model.graph.input if vi.name not in inits}
data = model.SerializeToString()
shapes = {k: list(v.shape) for k, v in feeds.items()}
t0 = time.perf_counter()
if side == "raw_ort":
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    run = lambda: dict(zip(names, s.run(None, feeds)))
elif side == "raw_ov":
    import openvino as ov
    core = ov.Core()
    m = core.read_model(data, b"")
    if any(p.get_partial_shape().is_dynamic for p in m.inputs):  # what an OpenVINO user does: fix the feed shapes
        m.reshape({p.get_any_name(): ov.PartialShape(shapes[p.get_any_name()]) for p in m.inputs})
    c = core.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0})
    req = c.create_infer_request()
    names = [o.get_any_name() for o in c.outputs]
    run = lambda: {n: np.array(req.infer(feeds)[i]) for i, n in enumerate(names)}
else:
    from nnrt_core import ScheduleConfig, Session
    fixed = {"input_shapes": shapes} if spec.get("real") else {}  # measure on the feeds' shapes
    if side == "nnrt_plain":
        cfg = ScheduleConfig(backends=["onnxruntime"], scheduler="priority", **fixed)
    elif side.startswith("plan_"):  # the chosen plan named, in its own cache folder
        cfg = ScheduleConfig(backends=spec["plan"], scheduler="priority", precision=spec["precision"],
                             cache_dir=os.path.join(cache, "plan"), **fixed)
    else:  # --measure-feeds: the plans timed on the feeds themselves (ScheduleConfig.measure_feeds)
        given = {"measure_feeds": feeds} if spec.get("measure_feeds") else {}
        cfg = ScheduleConfig(cache_dir=cache, **fixed, **given)
    s = Session(data, cfg)
    run = lambda: s.run(feeds)
build = time.perf_counter() - t0
out = run()
times, spent = [], time.perf_counter()
k = 0  # `runs` runs and at least MIN_TIME s of them (sub-millisecond models: the steady state, not the
while True:  # first runs after the build), but no more than ~3 s of them (at least 5 runs)
    t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
    k, elapsed = k + 1, time.perf_counter() - spent
    if (k >= runs and elapsed >= MIN_TIME) or (k >= 5 and elapsed > 3.0) or k >= 100000:
        break
res = {"build": build, "median": float(np.median(times)),
       # a strided sample of each output (<= 4096 values over the whole array) and its max|.|
       "outputs": {k: (lambda a: {"sample": a[::max(1, a.size // 4096)][:4096].tolist(),
                                  "scale": float(np.abs(a).max()) if a.size else 0.0})(np.asarray(v, np.float64).ravel())
                   for k, v in out.items()}}
if not side.startswith("raw"):  # where the build's time went (Session.stats()["build"], seconds per stage)
    res["stages"] = {k: float(v) for k, v in s.stats()["build"].items()}
if side != "nnrt_plain" and not side.startswith("raw"):
    res["chosen"] = ", ".join(sorted({p.backend for p in s.partitions})) + f" ({s.config.precision})"
    res["cache_hit"] = bool(s.compiled_model.cache_hit)
    res["plan"], res["precision"] = list(s.config.backends), s.config.precision
    res["measured"] = not any("without measuring" in e.message for e in s.events if e.kind == "plan_measured")
print("RESULT " + json.dumps(res))
"""


#: the children's environment (main() removes PYTHONDONTWRITEBYTECODE unless --keep-env)
CHILD_ENV: dict[str, str] | None = None
#: the least seconds of timed runs per child (``--min-time``)
MIN_TIME = 0.5


#: untimed: every plugin imported once, so the timed children find their bytecode written
WARM = "from nnrt_core.registry import default_registry; default_registry().load_all(); import onnxruntime, onnx"


def _set_min_time(seconds: float) -> None:
    global MIN_TIME
    MIN_TIME = seconds


def _child(side: str, spec: dict, runs: int, cache: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), side, json.dumps(spec), str(runs), cache,
                           str(MIN_TIME)],
                          capture_output=True, text=True, timeout=900, env=CHILD_ENV)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{side} on {spec['name']} failed:\n{proc.stderr[-2000:]}")


def _rel_err(a: dict, b: dict) -> float:
    """max |a - b| / max|b| over the outputs' samples (the scale of the whole reference output)."""
    worst = 0.0
    for k, ref in b.items():
        got = a.get(k)
        if got is None or len(got["sample"]) != len(ref["sample"]):
            return float("inf")
        if not ref["sample"]:
            continue
        scale = ref["scale"] or 1.0
        worst = max(worst, max(abs(x - y) for x, y in zip(got["sample"], ref["sample"])) / scale)
    return worst


def bench(spec: dict, rounds: int, runs: int, with_ov: bool) -> dict:
    """One model (``spec``: name, path, kind light/real, and for a real model
    its key in real_models.SPECS and the models folder): every side in its own
    process, ``rounds`` interleaved rounds, medians and ratios."""
    sides = ["raw_ort"] + (["raw_ov"] if with_ov else []) + ["nnrt_plain", "nnrt", "nnrt_cached", "plan_fill",
                                                                 "plan_cached"]
    got: dict[str, list[dict]] = {s: [] for s in sides}
    failed: dict[str, str] = {}
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as cache:  # a fresh cache per round: nnrt measures, nnrt_cached loads
            base, chain = sides[:-4], sides[-4:]  # each of the chain loads or names what the one before made
            for side in (base + chain if r % 2 == 0 else chain + base[::-1]):
                if side in failed or (side.startswith("plan_") and "nnrt" in failed):
                    continue
                plan = {"plan": got["nnrt"][-1]["plan"], "precision": got["nnrt"][-1]["precision"]} \
                    if side.startswith("plan_") else {}
                try:
                    got[side].append(_child(side, {**spec, **plan}, runs, cache))
                except RuntimeError as e:
                    failed[side] = str(e).strip().splitlines()[-1][:200]
    if failed.keys() - {"raw_ov"}:  # raw OpenVINO may not read a model (nnrt then places it elsewhere)
        raise RuntimeError(f"{spec['name']}: {failed}")
    if "raw_ov" in failed:
        print(f"{spec['name']}: raw OpenVINO failed ({failed['raw_ov']}); best engine = raw ORT", file=sys.stderr)
        sides.remove("raw_ov")
    med = {s: statistics.median(x["median"] for x in got[s]) for s in sides}
    build = {s: statistics.median(x["build"] for x in got[s]) for s in sides}
    raw_best = min(med["raw_ort"], med.get("raw_ov", math.inf))
    return {"model": spec["name"], "kind": spec["kind"], "ms": {s: med[s] * 1e3 for s in sides},
            "vs_ort": med["nnrt"] / med["raw_ort"], "vs_best": med["nnrt"] / raw_best,
            "best_vs_ort": raw_best / med["raw_ort"],
            "build_vs_plain": build["nnrt"] / build["nnrt_plain"],
            "cached_vs_plain": build["nnrt_cached"] / build["nnrt_plain"],
            "cached_vs_plan": build["nnrt_cached"] / build["plan_cached"],
            "build_s": {s: build[s] for s in sides},
            "stages": {s: _median_stages(got[s]) for s in ("nnrt", "nnrt_plain")},
            "rel_err": _rel_err(got["nnrt"][0]["outputs"], got["raw_ort"][0]["outputs"]),
            "chosen": got["nnrt"][-1].get("chosen") + ("" if got["nnrt"][-1].get("measured", True) else
                                                       " [unmeasured]"),
            "cache_hits": sum(bool(x.get("cache_hit")) for x in got["nnrt_cached"] + got["plan_cached"]),
            "rounds": rounds}


def _median_stages(results: list[dict]) -> dict[str, float]:
    """Per build stage, the median seconds over the rounds (0 where a round lacks the stage)."""
    names = sorted({k for r in results for k in r.get("stages", {})})
    return {k: statistics.median(r.get("stages", {}).get(k, 0.0) for r in results) for k in names}


#: the stages printed by --stages, in build order ("measure" holds the candidates' optimize, place and compiles)
STAGES = ("select", "load", "cache", "measure", "optimize", "place", "compile:onnxruntime", "compile:openvino",
          "explain", "warmup")


def print_stages(rows: list[dict]) -> None:
    """Per model, the median seconds of each build stage of the measuring build and of the plain one;
    ``timing`` = measure minus the candidates' optimize, place, compile and explain (first runs + timed runs)."""
    print("build stages, median seconds (Session.stats()['build']); timing = measure - the candidates' "
          "optimize/place/compile/explain")
    short = {"compile:onnxruntime": "c:ort", "compile:openvino": "c:ov"}
    print(f"{'model':<24}{'side':<7}{'total':>7}" + "".join(f"{short.get(n, n):>10}" for n in STAGES)
          + f"{'timing':>8}")
    for r in rows:
        for side, label in (("nnrt", "meas"), ("nnrt_plain", "plain")):
            st = r["stages"][side]
            inner = sum(v for k, v in st.items() if k in ("optimize", "place", "explain") or k.startswith("compile:"))
            timing = st.get("measure", 0.0) - inner if "measure" in st else 0.0
            print(f"{r['model']:<24}{label:<7}{r['build_s'][side]:>7.3f}"
                  + "".join(f"{st.get(n, 0.0):>10.3f}" for n in STAGES) + f"{timing:>8.3f}")


def light_specs(names: list[str]) -> list[dict]:
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return [{"name": m, "kind": "light", "path": str(light / f"light_{m}.onnx")} for m in names]


def real_specs(wanted: list[str], models_dir: str | None) -> list[dict]:
    """The real models of benchmarks/real_models.py found under the models
    folder (a line for each one missing), optionally only keys containing one of ``wanted``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import real_models

    root = real_models.models_dir(models_dir)
    out = []
    for spec in real_models.SPECS:
        if wanted and not any(w in spec.key for w in wanted):
            continue
        path = real_models.model_path(root, spec)
        if path is None:
            print(f"{spec.key}: not under {root}, skipped (python benchmarks/real_models.py --download)")
            continue
        out.append({"name": spec.key, "kind": "real", "path": str(path), "real": spec.key, "root": str(root)})
    return out


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


RATIOS = ("vs_ort", "vs_best", "best_vs_ort", "build_vs_plain", "cached_vs_plain", "cached_vs_plan")


def print_rows(rows: list[dict], rounds: int, runs: int) -> None:
    print(f"load average {os.getloadavg()[0]:.1f}; medians over {rounds} rounds of >= {runs} runs and >= {MIN_TIME:g} s "
          "(<= 3 s), one process each")
    print(f"{'model':<24}{'raw ORT ms':>11}{'raw OV ms':>10}{'plain ms':>9}{'nnrt ms':>9}{'x ORT':>7}{'x best':>7}"
          f"{'best/ORT':>9}"
          f"{'build x':>8}{'cached x':>9}{'x plan':>7}{'rel err':>9}  chosen")
    for r in rows:
        ov = r["ms"].get("raw_ov")
        print(f"{r['model']:<24}{r['ms']['raw_ort']:>11.2f}{(f'{ov:.2f}' if ov else '-'):>10}"
              f"{r['ms']['nnrt_plain']:>9.2f}{r['ms']['nnrt']:>9.2f}"
              f"{r['vs_ort']:>7.3f}{r['vs_best']:>7.3f}{r['best_vs_ort']:>9.3f}{r['build_vs_plain']:>8.2f}"
              f"{r['cached_vs_plain']:>9.2f}{r['cached_vs_plan']:>7.2f}{r['rel_err']:>9.1e}  {r['chosen']}")
    groups = [("light", [r for r in rows if r["kind"] == "light"]), ("real", [r for r in rows if r["kind"] == "real"])]
    if all(g for _, g in groups):
        groups.append(("all", rows))
    for label, group in groups:
        if group:
            print(f"geomean {label} ({len(group)}): "
                  + ", ".join(f"{k} {geomean([r[k] for r in group]):.3f}" for k in RATIOS))
    worst = max(rows, key=lambda r: r["vs_best"])
    print(f"worst vs the best single engine: {worst['model']} {worst['vs_best']:.3f} (target <= 1.03 on every model); "
          f"best_vs_ort = min(raw ORT, raw OV) / raw ORT: what choosing a whole-model engine can reach")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--models", default=None, help="light models, comma-separated (default squeezenet,resnet50 "
                    "unless --real is given)")
    ap.add_argument("--real", nargs="?", const="", default=None, metavar="KEYS",
                    help="the real models of benchmarks/real_models.py (optionally comma-separated key substrings)")
    ap.add_argument("--models-dir", default=None, help="where real_models.py put them (default /tmp/pypi_models)")
    ap.add_argument("--all", action="store_true", help="every light model and every real model found")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20, help="timed runs per child (at least; ~3 s of them at most)")
    ap.add_argument("--min-time", type=float, default=MIN_TIME,
                    help="and at least this many seconds of them (default %(default)s: sub-millisecond models are "
                    "timed in their steady state, not on the first runs after the build)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--stages", action="store_true", help="also print each build stage's median seconds")
    ap.add_argument("--keep-env", action="store_true", help="children keep PYTHONDONTWRITEBYTECODE if set")
    ap.add_argument("--measure-feeds", action="store_true",
                    help="the measuring side times its plans on the models' feeds (ScheduleConfig.measure_feeds)")
    a = ap.parse_args(argv)
    global CHILD_ENV
    _set_min_time(a.min_time)
    if not a.keep_env and "PYTHONDONTWRITEBYTECODE" in os.environ:
        CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", WARM], env=CHILD_ENV, capture_output=True, timeout=300)  # bytecode
    if a.paths:
        specs = [{"name": p.stem, "kind": "file", "path": str(p)} for p in a.paths]
    else:
        models = a.models if a.models is not None else ("" if a.real is not None else "squeezenet,resnet50")
        light_names = LIGHT_MODELS if a.all else [m for m in models.split(",") if m]
        specs = light_specs(light_names)
        if a.all or a.real is not None:
            specs += real_specs([w for w in (a.real or "").split(",") if w], a.models_dir)
    try:
        import openvino  # noqa: F401
        with_ov = True
    except ImportError:
        with_ov = False
    if a.measure_feeds:
        specs = [{**spec, "measure_feeds": True} for spec in specs]
    rows = []
    for spec in specs:
        try:
            rows.append(bench(spec, a.rounds, a.runs, with_ov))
        except RuntimeError as e:
            print(f"{spec['name']}: skipped, a side failed: {str(e)[-300:]}", file=sys.stderr)
            continue
        print(f"  {spec['name']}: x ORT {rows[-1]['vs_ort']:.3f}, x best {rows[-1]['vs_best']:.3f}",
              file=sys.stderr, flush=True)
    if not rows:
        print("no model measured")
        return 1
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print_rows(rows, a.rounds, a.runs)
    if a.stages:
        print_stages(rows)
    print("build x = nnrt / plain (ORT-only priority build, no cache); cached x = nnrt_cached / plain; "
          "x plan = nnrt_cached / plan_cached (a cached build of the plan chosen, named)")
    missed = [r["model"] for r in rows if r["cache_hits"] != 2 * r["rounds"]]
    if missed:
        print(f"WARNING: nnrt_cached or plan_cached did not load the cache on {missed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
