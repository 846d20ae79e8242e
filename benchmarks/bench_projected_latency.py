"""Projected device latency of the ``cost`` scheduler's plan against every single-backend plan.

    python benchmarks/bench_projected_latency.py [--runs N] [--models a,b] [--no-real] [--no-light] [--json FILE]

The NPU emulator runs its program on the host, so wall time says nothing about
the device.  Every plan is scored by its *projected latency*
(``nnrt_core.profiling.projection``): host partitions measured (median host wall
time), NPU partitions by the emulator's cost model (**simulated device time**),
host<->device copies modelled (bytes / link bandwidth + latency).

Plans per model (all with ``input_shapes`` = the feed shapes, so the NPU can
take part where it can):

* ``numpy``: ``backends=["numpy"]``;
* ``onnxruntime``: ``backends=["onnxruntime"], backup="numpy"``;
* ``npu_emu``: ``backends=["npu_emu"], backup="numpy"``;
* ``cost``: ``backends=["npu_emu", "onnxruntime"], backup="numpy", scheduler="cost"``.

Target: cost <= the best single-backend plan's projection on every model (a
cost plan with the same placement as the best single one counts as met: the
two differ only by measurement noise).  Plans are built and measured one
after another (an emulated chip's memory holds one large model at a time);
ONNX Runtime's own wall time (CPU provider, default options) is measured in
the same run, one call after every observed run, for reference.  Models: the onnx
wheel's ``light`` models and the real models of ``benchmarks/real_models.py``
(under ``$NNRT_REAL_MODELS`` or /tmp/pypi_models; missing ones are skipped).
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
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.profiling.projection import project, sample_run  # noqa: E402

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
SINGLES = {"numpy": {"backends": ["numpy"]},
           "onnxruntime": {"backends": ["onnxruntime"], "backup": "numpy"},
           "npu_emu": {"precision": "fp16", "backends": ["npu_emu"], "backup": "numpy"}}
COST = {"precision": "fp16", "backends": ["npu_emu", "onnxruntime"], "backup": "numpy", "scheduler": "cost"}
PAUSE_SECONDS = 0.02  # lets ONNX Runtime's spinning worker threads go idle between plans


def light_models() -> list[tuple[str, Path, dict[str, np.ndarray]]]:
    out = []
    for path in sorted(LIGHT_DIR.glob("light_*.onnx")):
        m = onnx.load(path, load_external_data=False)
        init = {i.name for i in m.graph.initializer}
        rng = np.random.default_rng(0)
        feeds = {}
        for i in m.graph.input:
            if i.name in init:
                continue
            shape = tuple(d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim)
            feeds[i.name] = rng.random(shape, dtype=np.float32)
        out.append((path.stem.removeprefix("light_"), path, feeds))
    return out


def real_models() -> list[tuple[str, Path, dict[str, np.ndarray]]]:
    import real_models as rm

    return rm.first_step_feeds(rm.models_dir(None))


def build(path: Path, feeds: dict[str, np.ndarray], cfg: dict[str, Any]) -> Session | str:
    shapes = {k: list(v.shape) for k, v in feeds.items()}
    try:
        # on_overflow="warn": latency of the placement as planned (the light models' placeholder weights exceed
        # fp16, and a fallback would time the backup instead)
        return Session(path, ScheduleConfig(**cfg, input_shapes=shapes, on_overflow="warn"))
    except Exception as e:  # a plan that cannot be built is reported, not fatal
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


def measure_plan(path: Path, feeds: dict[str, np.ndarray], cfg: dict[str, Any], runs: int, ref) -> dict[str, Any]:
    """Build one plan's session, project its latency over ``runs`` observed runs
    (each followed by an ONNX Runtime run), then release it (device memory)."""
    sess = build(path, feeds, cfg)
    if not isinstance(sess, Session):
        return {"problem": sess}
    sess.run(feeds)  # warm-up
    samples, ort_times = [], []
    for _ in range(runs):
        time.sleep(PAUSE_SECONDS)
        samples.append(sample_run(sess.compiled_model, sess.run_observed, feeds))
        time.sleep(PAUSE_SECONDS)
        t0 = time.perf_counter()
        ref.run(None, feeds)
        ort_times.append(time.perf_counter() - t0)
    pr = project(sess.compiled_model, samples)
    counts: dict[str, int] = {}
    for b in sess.placement.values():
        counts[b] = counts.get(b, 0) + 1
    out = {"projected_ms": pr.projected_ms, "wall_ms": pr.wall_ms, "host_ms": pr.host_ms,
           "simulated_ms": pr.simulated_ms, "transfer_ms": pr.transfer_ms, "partitions": len(pr.partitions),
           "nodes": counts, "placement": dict(sess.placement), "ort_times": ort_times}
    del sess
    release_device_memory()  # the next plan's NPU partitions need the emulated chip's memory
    return out


def release_device_memory() -> None:
    """Free the emulated chip's memory held by released sessions.  The emulator's
    command-queue worker keeps its last job (and so that job's partition and
    weights) until the next job arrives, so one tiny job is run after a collection."""
    gc.collect()
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "flush",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    tiny = Session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                   ScheduleConfig(precision="fp16", backends=["npu_emu"], backup="numpy"))
    tiny.run({"x": np.zeros((1, 4), np.float32)})
    del tiny
    gc.collect()


def bench_model(name: str, path: Path, feeds: dict[str, np.ndarray], runs: int) -> dict[str, Any]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    ref.run(None, feeds)
    plans = {label: measure_plan(path, feeds, cfg, runs, ref) for label, cfg in {**SINGLES, "cost": COST}.items()}
    ort_times = [t for p in plans.values() for t in p.pop("ort_times", [])]
    row: dict[str, Any] = {"model": name, "ort_wall_ms": statistics.median(ort_times) * 1e3, "plans": plans}
    singles = {k: v["projected_ms"] for k, v in plans.items() if k != "cost" and "projected_ms" in v}
    best = min(singles, key=singles.get) if singles else None
    row["best_single"] = best
    cost = plans["cost"].get("projected_ms")
    same = [k for k in singles if plans[k]["placement"] == plans["cost"].get("placement")]
    row["same_plan_as"] = same
    # a plan identical to the best single one (same placement) differs from it only by measurement noise
    row["ok"] = cost is not None and best is not None and (cost <= singles[best] or best in same)
    return row


def fmt_nodes(counts: dict[str, int]) -> str:
    short = {"npu_emu": "npu", "onnxruntime": "ort", "numpy": "np"}
    return " ".join(f"{short.get(k, k)}:{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (f"{'model':<24}{'numpy':>10}{'ort':>10}{'npu_emu':>10}{'cost':>10}  {'best single':<12}"
            f"{'cost/best':>9}{'ORT wall':>10}  {'cost placement':<22}{'cost wall':>11}")
    print("projected latency, ms (host partitions measured + NPU partitions simulated device time + "
          "modelled copies)")
    print(head)
    for r in rows:
        p = r["plans"]
        cells = "".join(f"{p[k]['projected_ms']:>10.3f}" if "projected_ms" in p[k] else f"{'n/a':>10}"
                        for k in ("numpy", "onnxruntime", "npu_emu", "cost"))
        best = r["best_single"]
        ratio = p["cost"]["projected_ms"] / p[best]["projected_ms"] if best and "projected_ms" in p["cost"] \
            else float("nan")
        same = f" (= {'/'.join(r['same_plan_as'])})" if r["same_plan_as"] else ""
        print(f"{r['model']:<24}{cells}  {str(best):<12}{ratio:>9.3f}{r['ort_wall_ms']:>10.3f}  "
              f"{fmt_nodes(p['cost'].get('nodes', {})) + same:<22}{p['cost'].get('wall_ms', float('nan')):>11.1f}")
    ok = sum(r["ok"] for r in rows)
    print(f"\ncost <= best single-backend projection on {ok}/{len(rows)} models (or the same plan: '= x' names the "
          "single-backend plans with the cost plan's placement, which differ from it only by noise).  'cost wall' "
          "is the host wall time of the cost plan on this machine (the emulator runs the NPU program on the host); "
          "ORT wall is ONNX Runtime's own session, one run after each observed run of every plan (median).")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="observed runs per plan (median)")
    ap.add_argument("--models", default="", help="comma-separated substrings of model names")
    ap.add_argument("--no-light", action="store_true")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    args = ap.parse_args()
    logging.getLogger("nnrt").setLevel(logging.ERROR)
    models = ([] if args.no_light else light_models()) + ([] if args.no_real else real_models())
    wanted = [w.strip() for w in args.models.split(",") if w.strip()]
    rows = []
    for name, path, feeds in models:
        if wanted and not any(w in name for w in wanted):
            continue
        t0 = time.perf_counter()
        rows.append(bench_model(name, path, feeds, args.runs))
        print(f"  {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
