"""Loading a model whose weights are in an ONNX external-data file: time and memory.

    python benchmarks/bench_weights.py [--runs 5] [--backend onnxruntime] [--optimization-level basic]
                                       [--baseline-root DIR] [--json]

The model is the onnx wheel's ``light_resnet50`` with He-initialized weights
(about 100 MB of float32), saved with all weights in one external-data file.
Every measurement runs in a fresh Python process (the data file is in the OS
page cache, as it is for any model loaded more than once) and reports:

* ``load ms``: ``load_onnx(path)`` (parse, external data, checks, IR), and
  ``load anon/file MB``: RssAnon / RssFile right after it, with one byte of
  every weight page read (so mapped weights count as they would in use);
* ``session ms``: ``Session(path, ScheduleConfig(backends=[BACKEND], optimization_level=LEVEL))``
  (``--optimization-level none`` keeps the loaded weights as they are; the
  default ``basic`` folds ResNet50's BatchNorms into new Conv weights);
* ``first run ms``: the first ``run()`` (touches every weight);
* ``anon MB`` / ``file MB``: the process's RssAnon / RssFile (``/proc/self/status``)
  after the session's first run, and ``peak MB``: ``ru_maxrss``.

With ``--baseline-root DIR`` (another checkout, e.g. the commit before a
change) every round also runs the same measurement with that checkout's code
first on ``PYTHONPATH``, interleaved, and the table gives both and their ratio
(this checkout / baseline).
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

import onnx

ROOT = Path(__file__).resolve().parents[1]
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
FIELDS = ("load_ms", "load_anon_mb", "load_file_mb", "session_ms", "first_run_ms", "anon_mb", "file_mb",
          "peak_mb")

CHILD = r"""
import json, resource, sys, time
import numpy as np
from nnrt_core import ScheduleConfig, Session
from nnrt_core.frontends import load_onnx

def rss():
    got = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile"):
                got[k] = int(v.split()[0]) / 1024
    return got

path, backend, level = sys.argv[1:4]
t0 = time.perf_counter(); m = load_onnx(path); t1 = time.perf_counter()
touched = sum(float(v.const.reshape(-1)[::1024].sum()) for v in m.graph.initializers.values())  # every 4 KiB page
loaded = rss()
del m
cfg = ScheduleConfig(backends=[backend], backup="numpy", optimization_level=level)
t2 = time.perf_counter(); s = Session(path, cfg); t3 = time.perf_counter()
x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
t4 = time.perf_counter(); y = s.run({s.inputs[0].name: x}); t5 = time.perf_counter()
r = rss()
print(json.dumps({"load_ms": (t1 - t0) * 1e3, "load_anon_mb": loaded["RssAnon"],
                  "load_file_mb": loaded["RssFile"], "session_ms": (t3 - t2) * 1e3, "first_run_ms": (t5 - t4) * 1e3,
                  "anon_mb": r["RssAnon"], "file_mb": r["RssFile"],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "checksum": float(np.dot(np.ravel(next(iter(y.values()))).astype(np.float64),
                                           np.arange(1, np.size(next(iter(y.values()))) + 1)))}))
"""


def python_path(root: Path) -> str:
    """PYTHONPATH with ``root``'s core, plugins and schedulers first."""
    parts = [root, root / "plugins" / "numpy", root / "plugins" / "npu_emu", root / "plugins" / "onnxruntime",
             root / "schedulers"]
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([str(p) for p in parts] + ([rest] if rest else []))


def build_model(folder: Path) -> Path:
    """light_resnet50 with He weights, all of them in ``folder/model.data``."""
    sys.path.insert(0, str(ROOT / "examples"))
    from light_weights import he_initialized

    m = he_initialized(onnx.load(str(LIGHT / "light_resnet50.onnx")))
    path = folder / "model.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.data", size_threshold=1024)
    return path


def measure(root: Path, model: Path, backend: str, level: str) -> dict:
    env = {**os.environ, "PYTHONPATH": python_path(root)}
    # cwd: ``python -c`` puts the working directory first on sys.path, ahead of PYTHONPATH
    out = subprocess.run([sys.executable, "-c", CHILD, str(model), backend, level], env=env, check=True,
                         cwd=model.parent, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--backend", default="onnxruntime")
    ap.add_argument("--optimization-level", default="basic")
    ap.add_argument("--baseline-root", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    roots = {"this": ROOT} if args.baseline_root is None else {"baseline": args.baseline_root.resolve(),
                                                              "this": ROOT}
    with tempfile.TemporaryDirectory() as d:
        model = build_model(Path(d))
        data_mb = (Path(d) / "model.data").stat().st_size / 2**20
        samples: dict[str, list[dict]] = {k: [] for k in roots}
        for _ in range(args.runs):
            for name, root in roots.items():
                samples[name].append(measure(root, model, args.backend, args.optimization_level))
    sums = {name: {s["checksum"] for s in runs} for name, runs in samples.items()}
    medians = {name: {f: statistics.median(s[f] for s in runs) for f in FIELDS} for name, runs in samples.items()}
    if args.json:
        print(json.dumps({"data_mb": data_mb, "backend": args.backend, "level": args.optimization_level,
                          "medians": medians, "checksums": {k: sorted(v) for k, v in sums.items()}}, indent=2))
        return
    print(f"light_resnet50, {data_mb:.1f} MB external data, backend {args.backend}, "
          f"medians of {args.runs} fresh processes")
    print(f"{'':<10}" + "".join(f"{f:>14}" for f in FIELDS))
    for name, med in medians.items():
        print(f"{name:<10}" + "".join(f"{med[f]:>14.1f}" for f in FIELDS))
    if "baseline" in medians:
        base, this = medians["baseline"], medians["this"]
        print(f"{'ratio':<10}" + "".join(f"{this[f] / base[f] if base[f] else float('nan'):>14.2f}"
                                         for f in FIELDS))
    print("output sums:", {k: sorted(v) for k, v in sums.items()})


if __name__ == "__main__":
    main()
