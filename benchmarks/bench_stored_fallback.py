"""What the fp16-overflow fallback stored in session files costs, interleaved.

    python benchmarks/bench_stored_fallback.py [--runs 5] [--models squeezenet,resnet50] [--json]

For each light model on the emulated NPU (``precision="fp16"``, backup numpy)
it writes the session file with ``on_overflow="fallback"`` (each fp16
partition also compiled for the backup and stored: format 3) and with
``on_overflow="warn"`` (nothing stored), interleaved, and reports the medians
of ``Session.save`` and ``Session(file)`` and the file sizes; then the first
run of a loaded session on inputs that overflow fp16 (it loads the stored
backup copy and runs there) against the same run of an in-process session
(which rebuilds from the source), and checks both give the same outputs.
NPU times here are host wall times of the emulator, not simulated device time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
BASE = dict(backends=["npu_emu"], backup="numpy", precision="fp16")


def _feeds(sess: Session, scale: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {i.name: (rng.random([d if isinstance(d, int) else 1 for d in i.shape]) * scale).astype(np.float32)
            for i in sess.inputs}


def measure(model: Path, runs: int) -> dict:
    sessions = {p: Session(str(model), ScheduleConfig(**BASE, on_overflow=p)) for p in ("fallback", "warn")}
    save: dict[str, list[float]] = {p: [] for p in sessions}
    load: dict[str, list[float]] = {p: [] for p in sessions}
    size: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as d:
        for r in range(runs):
            for p in (list(sessions) if r % 2 == 0 else list(sessions)[::-1]):
                path = Path(d) / f"{p}.nnrt"
                t = time.perf_counter()
                sessions[p].save(path)
                save[p].append(time.perf_counter() - t)
                size[p] = os.path.getsize(path)
                t = time.perf_counter()
                Session(path)
                load[p].append(time.perf_counter() - t)
        feeds = _feeds(sessions["fallback"], 1e3)  # far beyond what the chip's fp16 stores hold
        loaded = Session(Path(d) / "fallback.nnrt")
        t = time.perf_counter()
        got = loaded.run(feeds)
        file_first = time.perf_counter() - t
    fresh = Session(str(model), ScheduleConfig(**BASE))
    t = time.perf_counter()
    want = fresh.run(feeds)
    inproc_first = time.perf_counter() - t
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    fell = [e.kind for e in loaded.events if e.kind == "overflow_fallback"]
    med = {k: {p: statistics.median(v) for p, v in d_.items()} for k, d_ in (("save", save), ("load", load))}
    return {"model": model.stem, "save_s": med["save"], "load_s": med["load"], "bytes": size,
            "save_ratio": med["save"]["fallback"] / med["save"]["warn"],
            "load_ratio": med["load"]["fallback"] / med["load"]["warn"],
            "bytes_ratio": size["fallback"] / size["warn"], "fell_back": bool(fell),
            "first_overflow_run_s": {"file": file_first, "in_process": inproc_first}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--models", default="squeezenet,resnet50")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = [measure(LIGHT / f"light_{m}.onnx", a.runs) for m in a.models.split(",")]
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'model':<12}{'save ms fb/warn':>18}{'x':>6}{'load ms fb/warn':>18}{'x':>6}{'MB fb/warn':>14}{'x':>6}"
          f"{'1st overflow run s file/in-proc':>34}")
    for r in rows:
        s, l_, b, f = r["save_s"], r["load_s"], r["bytes"], r["first_overflow_run_s"]
        print(f"{r['model']:<12}{s['fallback'] * 1e3:>9.1f}/{s['warn'] * 1e3:<8.1f}{r['save_ratio']:>6.2f}"
              f"{l_['fallback'] * 1e3:>9.1f}/{l_['warn'] * 1e3:<8.1f}{r['load_ratio']:>6.2f}"
              f"{b['fallback'] / 1e6:>7.2f}/{b['warn'] / 1e6:<6.2f}{r['bytes_ratio']:>6.2f}"
              f"{f['file']:>17.2f}/{f['in_process']:<16.2f}{'' if r['fell_back'] else '  (no overflow)'}")


if __name__ == "__main__":
    main()
