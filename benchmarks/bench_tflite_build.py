"""Session build time of TFLite models on the NumPy backend vs the LiteRT
interpreter's ``Interpreter()`` + ``allocate_tensors()`` on the same file.

    python benchmarks/bench_tflite_build.py [--runs N] [--real DIR] [--json]

Warm process (every model built once before timing), the two sides
interleaved run by run, medians reported with the ratio nnrt / LiteRT
(target <= 3).  Models: MobileNet-shaped models written in code (fp32 and
fp16 weights behind DEQUANTIZE) plus every ``.tflite`` under ``--real``
(default /tmp/tflite_models, skipped when absent) that LiteRT loads and
nnrt maps.  Each model's outputs are checked against LiteRT once.  The
``import ms`` column times ``load_model`` alone (the TFLite frontend and node
validation), the rest of nnrt's build being passes, placement and compile.
``cpu ratio`` is the same ratio in process CPU time (``process_time``, all
threads), which other load on a shared machine disturbs less than wall time.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the TFLite model writer

from tflite_models import mobilenet_like  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.compiler.load import load_model  # noqa: E402
from nnrt_core.errors import NnrtError  # noqa: E402


def _litert(path: str) -> tuple[float, float]:
    from ai_edge_litert.interpreter import Interpreter
    t, c = time.perf_counter(), time.process_time()
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    return time.perf_counter() - t, time.process_time() - c


def _nnrt(path: str) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    Session(path, ScheduleConfig(backends=["numpy"]))
    return time.perf_counter() - t, time.process_time() - c


def _import(path: str) -> tuple[float, float]:
    """The import alone: ``load_model`` (TFLite frontend + node validation), no passes, placement or compile."""
    t, c = time.perf_counter(), time.process_time()
    load_model(path)
    return time.perf_counter() - t, time.process_time() - c


def _max_rel(path: str) -> float:
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    feeds = {}
    for d in it.get_input_details():
        x = rng.uniform(0, 1, d["shape"]).astype(d["dtype"])
        it.set_tensor(d["index"], x)
        feeds[d["name"]] = x
    it.invoke()
    refs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    outs = list(Session(path, ScheduleConfig(backends=["numpy"])).run(feeds).values())
    return max(float(np.abs(o - r).max() / max(np.abs(r).max(), 1e-12)) for o, r in zip(outs, refs))


def measure(path: str, runs: int) -> dict:
    _litert(path), _nnrt(path), _import(path)  # warm: imports, plugin loading, first-call caches
    lite, ours, imp = [], [], []
    for _ in range(runs):
        for fn, out in ((_litert, lite), (_nnrt, ours), (_import, imp)):
            gc.collect()
            out.append(fn(path))
    lm, om, im = (statistics.median(w for w, _ in xs) for xs in (lite, ours, imp))
    lc, oc = (statistics.median(c for _, c in xs) for xs in (lite, ours))
    return {"litert_ms": lm * 1e3, "nnrt_ms": om * 1e3, "import_ms": im * 1e3, "ratio": om / lm,
            "litert_cpu_ms": lc * 1e3, "nnrt_cpu_ms": oc * 1e3, "cpu_ratio": oc / max(lc, 1e-9),
            "max_rel": _max_rel(path)}


def models(real: Path, tmp: Path) -> list[tuple[str, str]]:
    out = []
    for name, data in (("mobilenet_like_fp32", mobilenet_like()), ("mobilenet_like_fp16", mobilenet_like(fp16=True)),
                       ("mobilenet_like_160_x0.5", mobilenet_like(size=160, width=16))):
        p = tmp / f"{name}.tflite"
        p.write_bytes(data)
        out.append((name, str(p)))
    if real.is_dir():
        out += [(p.stem, str(p)) for p in sorted(real.rglob("*.tflite"))]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--real", default="/tmp/tflite_models")
    ap.add_argument("--only", default="", help="comma-separated substrings of model names to keep")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, path in models(Path(args.real), Path(d)):
            if args.only and not any(s in name for s in args.only.split(",")):
                continue
            try:
                rows.append({"model": name, **measure(path, args.runs)})
            except (NnrtError, RuntimeError, ValueError) as e:  # unmapped ops, or LiteRT refuses the file
                rows.append({"model": name, "skipped": f"{type(e).__name__}: {str(e)[:90]}"})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'model':42}{'LiteRT ms':>11}{'nnrt ms':>10}{'ratio':>8}{'import ms':>11}{'cpu ratio':>10}{'max rel':>10}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['model'][:41]:42}  skipped: {r['skipped']}")
        else:
            print(f"{r['model'][:41]:42}{r['litert_ms']:11.2f}{r['nnrt_ms']:10.2f}{r['ratio']:8.2f}"
                  f"{r['import_ms']:11.2f}{r['cpu_ratio']:10.2f}{r['max_rel']:10.1e}")
    done = [r["ratio"] for r in rows if "ratio" in r]
    if done:
        share = statistics.median(r["import_ms"] / r["nnrt_ms"] for r in rows if "ratio" in r)
        print(f"median ratio nnrt / LiteRT over {len(done)} models: {statistics.median(done):.2f} "
              f"(max {max(done):.2f}; target <= 3); the import is a median {share:.0%} of nnrt's build")
        cpu = [r["cpu_ratio"] for r in rows if "ratio" in r]
        print(f"median CPU-time ratio (process_time, all threads; less disturbed by other load): "
              f"{statistics.median(cpu):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
