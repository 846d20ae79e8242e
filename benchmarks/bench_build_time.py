"""Warm-process session build time of ONNX models: nnrt on the NumPy and on
the ONNX Runtime backend against raw ``onnxruntime.InferenceSession``.

    python benchmarks/bench_build_time.py [--runs 7] [--only squeezenet,silero] [--models-dir DIR] [--json]

Models: the onnx wheel's ``light`` models and the real models of
``benchmarks/real_models.py`` found under ``--models-dir`` (default
``$NNRT_REAL_MODELS`` or /tmp/pypi_models; skipped when absent).  Every
model is built once per kind before timing (imports, plugin loading,
first-call caches), then the three kinds are interleaved run by run and the
medians printed, wall time (``perf_counter``) and process CPU time
(``process_time``, all threads; less disturbed by other load on a shared
machine), with the ratios nnrt / ORT.  ``stages`` is the median of nnrt's
NumPy build stages (``Session.stats()["build"]``, milliseconds): load,
optimize, place, compile, rest.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_models import SPECS, model_path, models_dir  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _ort(path: str) -> Callable[[], Any]:
    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # no warnings about unused initializers on every build
    return lambda: ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _nnrt(path: str, backend: str) -> Callable[[], Any]:
    return lambda: Session(path, ScheduleConfig(backends=[backend]))


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    gc.collect()
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def _stages(build: dict[str, float]) -> dict[str, float]:
    compile_s = sum(v for k, v in build.items() if k.startswith("compile:"))
    named = {"load": build.get("load", 0.0), "optimize": build.get("optimize", 0.0),
             "place": build.get("place", 0.0), "compile": compile_s}
    named["rest"] = sum(build.values()) - sum(named.values())
    return named


def measure(path: str, runs: int) -> dict[str, Any]:
    kinds = {"ort": _ort(path), "numpy": _nnrt(path, "numpy"), "nnrt_ort": _nnrt(path, "onnxruntime")}
    for fn in kinds.values():
        fn()  # warm
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    stages: list[dict[str, float]] = []
    for _ in range(runs):
        for k, fn in kinds.items():
            w, c, out = _timed(fn)
            wall[k].append(w)
            cpu[k].append(c)
            if k == "numpy":
                stages.append(_stages(out.stats()["build"]))
    row: dict[str, Any] = {}
    for k in kinds:
        row[f"{k}_ms"] = statistics.median(wall[k]) * 1e3
        row[f"{k}_cpu_ms"] = statistics.median(cpu[k]) * 1e3
    row["stages_ms"] = {s: statistics.median(d[s] for d in stages) * 1e3 for s in stages[0]}
    return row


def models(root: Path) -> list[tuple[str, str]]:
    out = [(p.stem.removeprefix("light_"), str(p)) for p in sorted(LIGHT.glob("light_*.onnx"))]
    for spec in SPECS:
        p = model_path(root, spec) if root.is_dir() else None
        if p is not None:
            out.append((spec.key, str(p)))
    return out


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"{'model':26}{'ORT ms':>9}{'numpy ms':>10}{'ratio':>7}{'nnrt-ort':>10}{'ratio':>7}"
          f"{'cpu np/ORT':>11}{'cpu ort/ORT':>12}   stages (numpy, ms)")
    for r in rows:
        if "skipped" in r:
            print(f"{r['model'][:25]:26}skipped: {r['skipped']}")
            continue
        st = " ".join(f"{k} {v:.1f}" for k, v in r["stages_ms"].items())
        print(f"{r['model'][:25]:26}{r['ort_ms']:9.2f}{r['numpy_ms']:10.2f}{r['numpy_ms'] / r['ort_ms']:7.2f}"
              f"{r['nnrt_ort_ms']:10.2f}{r['nnrt_ort_ms'] / r['ort_ms']:7.2f}"
              f"{r['numpy_cpu_ms'] / r['ort_cpu_ms']:11.2f}{r['nnrt_ort_cpu_ms'] / r['ort_cpu_ms']:12.2f}   {st}")
    done = [r for r in rows if "skipped" not in r]
    if done:
        for k, label in (("numpy", "NumPy backend"), ("nnrt_ort", "ORT backend")):
            ratios = [r[f"{k}_ms"] / r["ort_ms"] for r in done]
            cpu = [r[f"{k}_cpu_ms"] / r["ort_cpu_ms"] for r in done]
            total = statistics.median(r[f"{k}_ms"] for r in done)
            print(f"nnrt ({label}) / raw ORT session creation over {len(done)} models: median ratio "
                  f"{statistics.median(ratios):.2f} wall, {statistics.median(cpu):.2f} cpu; median build {total:.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated substrings of model names to keep")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    rows = []
    for name, path in models(models_dir(args.models_dir)):
        if args.only and not any(s in name for s in args.only.split(",")):
            continue
        try:
            rows.append({"model": name, **measure(path, args.runs)})
        except Exception as e:  # noqa: BLE001 - a model one side cannot build is reported, not fatal
            rows.append({"model": name, "skipped": f"{type(e).__name__}: {str(e)[:90]}"})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
