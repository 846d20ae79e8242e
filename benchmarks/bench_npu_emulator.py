"""Emulated NPU vs the NumPy backend (and ONNX Runtime), interleaved in one process.

    python benchmarks/bench_npu_emulator.py [--runs N] [--models a,b] [--precisions fp32,fp16,int8]
                                            [--fp32-chip] [--ort-interleaved] [--json]

For every onnx `light` model and precision it builds a session with
``ScheduleConfig(backends=["npu_emu"], precision=p, backup="numpy")``, one
with ``backends=["numpy"]`` and an ONNX Runtime session (CPU provider, its
default settings), and calls the emulator and the NumPy backend in turn,
``--runs`` rounds, on the same input, then ORT ``--runs`` times.  ORT is not
interleaved with the two by default: its idle threads spin for a while after
each of its runs, which keeps both cores awake and hides what waking a helper
thread costs the code that runs next (the emulator's ShuffleNet looked 1.4x
the NumPy backend interleaved with ORT and 2.1x without, before its store
rounding stopped waking helpers for small stores); ``--ort-interleaved``
interleaves all three as before.  It prints the median host wall time of each, the ratios emulator /
NumPy and emulator / ORT, the ratio of the median process CPU time per call
of the emulator and the NumPy backend (``cpu emu/numpy``: all threads'
work, which other processes on a shared machine disturb less than wall
time), and the number of nodes the emulator left to its
backup (a chip accepts a subset of ONNX: e.g. rank <= 4, no LRN).  The
emulator runs with ``on_overflow="warn"`` (so that the chip is timed even
where its fp16 stores saturate); ``overflow`` names the nodes that did.

``int8`` runs the model's ``nnrt quantize`` output (QDQ, calibrated on 8
uniform [0, 1) images as in ``bench_npu_int8.py``) with ``precision="int8"``
on the emulator, and the same QDQ file on the NumPy backend and ORT (the
precisions to run are ``fp32,fp16`` unless ``--precisions`` says otherwise).

Host wall time is what the emulator costs on this machine.  The emulator's
*simulated device time* (its cost model: cycles / clock of the chip) is
printed too and labelled so; it does not depend on the host.

The built-in chip ``emu-npu-f16`` computes in fp16 only, so ``fp32`` there
also runs in fp16 storage.  ``--fp32-chip`` adds a chip profile with fp32
and fp16 (same op set, 1 GiB of device memory) and runs ``fp32`` on it.

One emulator session exists at a time (a chip's device memory holds one
large model's weights: VGG-19 needs 274 MB in fp16); the NumPy and ORT
sessions stay for all precisions of a model.  The 1-minute load average
before and after is printed: on a shared machine it says how far the
numbers can be trusted.
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from nnrt_core import ScheduleConfig, Session

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]
FP32_CHIP = """
[[chip]]
name = "bench-npu-f32"
vendor = "nnrt-bench"
dtypes = ["fp32", "fp16"]
macs_per_cycle = {fp32 = 512, fp16 = 1024}
clock_mhz = 800
bandwidth_gbps = 25.6
onchip_kib = 2048
device_memory_mib = 1024
launch_cycles = 400
max_rank = 4
"""


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def interleaved(calls: dict, runs: int, cpu: dict | None = None) -> dict[str, float]:
    """Median seconds per call of each side: ``runs`` rounds (after a warm-up
    round) calling every side once, in every order in turn (all permutations,
    so each side follows each other side equally often: ORT's pool keeps
    spinning for a while after its runs, and whoever follows it gets less CPU).
    ``cpu`` (when given) receives each side's median process CPU seconds per
    call (all threads; less sensitive than wall time to other processes)."""
    for call in calls.values():
        call()
    orders = list(itertools.permutations(calls))
    times: dict[str, list[float]] = {k: [] for k in calls}
    cpus: dict[str, list[float]] = {k: [] for k in calls}
    for r in range(runs):
        for k in orders[r % len(orders)]:
            c0, t0 = time.process_time(), time.perf_counter()
            calls[k]()
            times[k].append(time.perf_counter() - t0)
            cpus[k].append(time.process_time() - c0)
    if cpu is not None:
        cpu.update({k: statistics.median(v) for k, v in cpus.items()})
    return {k: statistics.median(v) for k, v in times.items()}


def emulator_config(precision: str, chip_file: str | None) -> ScheduleConfig:
    extra = {"npu_emu": {"profile_file": chip_file, "profile": "bench-npu-f32"}} if chip_file else None
    kw = {"backend_options": extra} if extra else {}
    if "on_overflow" in ScheduleConfig.fields():  # time the chip even where its fp16 saturates (flagged per row)
        kw["on_overflow"] = "warn"
    return ScheduleConfig(backends=["npu_emu"], precision=precision, backup="numpy", **kw)


def overflowed(sess: Session) -> str:
    """The nodes whose fp16 stores saturated in the runs so far ("-": none)."""
    return ",".join(n for e in sess.events if e.kind == "numeric_overflow" for n in e.nodes) or "-"


def simulated_ms(sess: Session) -> float:
    """The cost model's device time of one run over the emulator's partitions (simulated, not host time)."""
    return sum(float(p.details.get("est_time_ms", 0.0)) for p in sess.partitions if p.backend == "npu_emu")


def fallback_nodes(sess: Session) -> int:
    return sum(1 for p in sess.placement_report if p.backend != "npu_emu")


def quantized(name: str) -> bytes:
    """The ``nnrt quantize`` output (QDQ) of a light model, shipped weights (see bench_npu_int8.py)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_npu_int8 import float_model, qdq_with_logits

    model, calib, _ = float_model(name)
    return qdq_with_logits(model, calib)[0]


def bench_model(name: str, precisions: list[str], runs: int, chip_file: str | None,
                ort_apart: bool = False) -> list[dict]:
    path = LIGHT / f"light_{name}.onnx"
    sources = {"float": str(path)}
    if "int8" in precisions:
        sources["int8"] = quantized(name)
    refs = {k: Session(src, ScheduleConfig(backends=["numpy"])) for k, src in sources.items()}
    orts = {k: ort.InferenceSession(src, ort.SessionOptions(), providers=["CPUExecutionProvider"])
            for k, src in sources.items()}
    inp = refs["float"].inputs[0]
    feeds = {inp.name: np.random.default_rng(0).random(tuple(inp.shape), dtype=np.float32)}
    rows = []
    for prec in precisions:
        kind = "int8" if prec == "int8" else "float"
        ref, ortsess = refs[kind], orts[kind]
        expected = next(iter(ref.run(feeds).values()))
        emu = Session(sources[kind], emulator_config(prec, chip_file if prec == "fp32" else None))
        got = next(iter(emu.run(feeds).values()))
        ours = {"emu": lambda: emu.run(feeds), "numpy": lambda: ref.run(feeds)}
        ort_call = {"ort": lambda: ortsess.run(None, feeds)}
        cpu: dict[str, float] = {}
        if ort_apart:  # ORT timed after ours: its spinning threads do not keep the cores awake for them
            t = interleaved(ours, runs, cpu)
            t.update(interleaved(ort_call, runs))
        else:
            t = interleaved({**ours, **ort_call}, runs, cpu)
        rows.append({
            "model": name, "precision": prec, "emu_ms": t["emu"] * 1e3, "numpy_ms": t["numpy"] * 1e3,
            "ort_ms": t["ort"] * 1e3, "emu_over_numpy": t["emu"] / t["numpy"], "emu_over_ort": t["emu"] / t["ort"],
            "numpy_over_ort": t["numpy"] / t["ort"], "emu_cpu_ms": cpu["emu"] * 1e3, "numpy_cpu_ms": cpu["numpy"] * 1e3,
            "cpu_emu_over_numpy": cpu["emu"] / cpu["numpy"], "backup_nodes": fallback_nodes(emu),
            "simulated_device_ms": simulated_ms(emu),
            "max_rel_diff_vs_numpy": float(np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-30)),
            "fp16_overflow": overflowed(emu),
        })
        del emu, got
        gc.collect()  # frees the chip's device memory for the next session
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--precisions", default="fp32,fp16", help="any of fp32,fp16,int8")
    ap.add_argument("--fp32-chip", action="store_true", help="run fp32 on a chip with fp32 (see the docstring)")
    ap.add_argument("--ort-interleaved", action="store_true",
                    help="interleave ORT with the two nnrt sides (default: ORT timed after them)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = _load()
    precisions = args.precisions.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        chip_file = None
        if args.fp32_chip:
            chip_file = str(Path(tmp) / "bench_chip.toml")
            Path(chip_file).write_text(FP32_CHIP)
        if not args.json:
            print(f"load average (1 min) {load_before:.2f} on {os.cpu_count()} cores; medians of {args.runs} "
                  "interleaved runs (host wall time)", flush=True)
        rows = []
        for name in args.models.split(","):
            for r in bench_model(name, precisions, args.runs, chip_file, ort_apart=not args.ort_interleaved):
                rows.append(r)
                if not args.json:
                    print(f"{r['model']:<13} {r['precision']}  emu {r['emu_ms']:8.1f} ms  numpy {r['numpy_ms']:8.1f} ms"
                          f"  ort {r['ort_ms']:7.1f} ms | emu/numpy {r['emu_over_numpy']:5.2f}  emu/ort "
                          f"{r['emu_over_ort']:5.2f}  numpy/ort {r['numpy_over_ort']:5.2f} | cpu emu/numpy "
                          f"{r['cpu_emu_over_numpy']:5.2f} | backup nodes "
                          f"{r['backup_nodes']:3d} | simulated device time {r['simulated_device_ms']:7.2f} ms"
                          f" | max rel diff {r['max_rel_diff_vs_numpy']:.1e} | overflow {r['fp16_overflow']}",
                          flush=True)
    geo = float(np.exp(np.mean([np.log(r["emu_over_numpy"]) for r in rows]))) if rows else float("nan")
    geo_cpu = float(np.exp(np.mean([np.log(r["cpu_emu_over_numpy"]) for r in rows]))) if rows else float("nan")
    worst = max(rows, key=lambda r: r["emu_over_numpy"]) if rows else None
    worst_cpu = max(rows, key=lambda r: r["cpu_emu_over_numpy"]) if rows else None
    result = {"rows": rows, "geomean_emu_over_numpy": geo, "geomean_cpu_emu_over_numpy": geo_cpu,
              "load_average": [load_before, _load()]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"geometric-mean emu/numpy {geo:.2f}" + (f"; worst {worst['model']} {worst['precision']} "
                                                        f"{worst['emu_over_numpy']:.2f}" if worst else ""))
        print(f"geometric-mean CPU-time emu/numpy {geo_cpu:.2f}" + (
            f"; worst {worst_cpu['model']} {worst_cpu['precision']} {worst_cpu['cpu_emu_over_numpy']:.2f}"
            if worst_cpu else ""))
        print(f"load average (1 min) after: {result['load_average'][1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
