"""Latency of nnrt's default (measured) plan on the ``.tflite`` models against the LiteRT interpreter.

    python benchmarks/tflite_latency.py [--models-dir DIR] [--models face,palm] [--budget 6] [--json]

The models are those of ``benchmarks/tflite_models.py`` (``--download`` there
fetches them; this script never downloads).  Per model, four sides run, each
in its own long-lived process, driven block by block from this one so their
thread pools never share a process and no side always follows another:

* ``litert``: ``ai_edge_litert.interpreter.Interpreter(model_path, num_threads=2)``
  (its default XNNPACK delegate), ``--litert-threads`` to change;
* ``nnrt``: ``Session(path, ScheduleConfig(input_shapes=...))``: no backend or
  scheduler named, so with ONNX Runtime and OpenVINO installed it measures
  their plans and keeps the fastest (the plan a new user gets);
* ``raw_ort`` / ``raw_ov``: the same model as ONNX (nnrt's TFLite import,
  ``load_tflite`` + ``to_onnx``, before any nnrt pass) on a default
  ``onnxruntime.InferenceSession`` / OpenVINO's ``compile_model`` on the CPU
  with ``INFERENCE_PRECISION_HINT=f32``: what the engines give for this
  model without nnrt's session around them.

The feeds are the seeded inputs of ``tflite_models.py`` (first step; carried
state inputs of streaming models at their initial values).  Each round runs a
warm-up call and a block of timed calls on every side (the order reversed
every other round), until ``--budget`` seconds per model are spent (at least
``--min-rounds``, at most ``--max-rounds``).  Printed per model: the median ms
of each side, nnrt / LiteRT, nnrt / best raw engine, the plan nnrt chose and
nnrt's accuracy against LiteRT (``max |nnrt - litert| / max |litert|``, the
worst output; integer outputs in quantization steps); then the geomean of the
ratios.  The machine's load average is printed before and after: the figures
are only as good as the machine is quiet.
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
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tflite_models as tm  # noqa: E402  (the model list, feeds and the download)

SIDES = ("litert", "nnrt", "raw_ort", "raw_ov")

WORKER = r'''
import json, sys, time
import numpy as np
side, path, shapes_json, feeds_path, out_path, threads, every = sys.argv[1:8]
shapes = json.loads(shapes_json) or None
every = int(every)  # threads for every side (0: only LiteRT gets ``threads``, the others their defaults)
feeds = dict(np.load(feeds_path, allow_pickle=False))
t0 = time.perf_counter()
info = {}
if side == "litert":
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path, num_threads=int(threads))
    details = it.get_input_details()
    for d in details:
        if shapes and d["name"] in shapes:
            it.resize_tensor_input(d["index"], shapes[d["name"]])
    it.allocate_tensors()
    outs = it.get_output_details()
    def run():
        for d in details:
            it.set_tensor(d["index"], feeds[d["name"]])
        it.invoke()
        return {d["name"]: it.get_tensor(d["index"]) for d in outs}
elif side == "nnrt":
    from nnrt_core import ScheduleConfig, Session
    s = Session(path, ScheduleConfig(input_shapes=shapes, num_threads=every))
    names = [i.name for i in s.inputs]
    mine = {k: v for k, v in feeds.items() if k in names}
    run = lambda: s.run(mine)
    info["chosen"] = " + ".join(f"{p.backend}:{len(p.nodes)}" for p in s.partitions)
    info["precision"] = s.config.precision
else:
    from nnrt_core.frontends import to_onnx
    from nnrt_core.frontends.tflite import load_tflite
    data = to_onnx(load_tflite(path, input_shapes=shapes)).SerializeToString()
    if side == "raw_ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = every
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        onames = [o.name for o in sess.get_outputs()]
        mine = {k: v for k, v in feeds.items() if k in names}
        run = lambda: dict(zip(onames, sess.run(None, mine)))
    else:
        import openvino as ov
        core = ov.Core()
        hints = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0,
                 **({"INFERENCE_NUM_THREADS": every} if every else {})}
        c = core.compile_model(core.read_model(data, b""), "CPU", hints)
        req = c.create_infer_request()
        names = [i.get_any_name() for i in c.inputs]
        onames = [o.get_any_name() for o in c.outputs]
        mine = {k: v for k, v in feeds.items() if k in names}
        def run():
            req.infer(mine)
            return {n: req.get_output_tensor(i).data for i, n in enumerate(onames)}
info["build_s"] = time.perf_counter() - t0
first = run()
np.savez(out_path, **{k: np.array(v) for k, v in first.items()})
print("READY " + json.dumps(info), flush=True)
for line in sys.stdin:
    n = int(line)
    run()  # absorbs whatever the previous side left in the caches and thread pools
    times, cpu = [], time.process_time()
    for _ in range(n):
        t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
    print("TIMES " + json.dumps([times, (time.process_time() - cpu) / n]), flush=True)
'''


class Worker:
    """One side of one model in its own process; ``block(n)`` times ``n`` calls."""

    def __init__(self, side: str, path: Path, shapes: dict[str, list[int]], feeds: Path, out: Path, threads: int,
                 every: int):
        self.side, self.out = side, out
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, side, str(path), json.dumps(shapes), str(feeds),
                                      str(out), str(threads), str(every)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.info = json.loads(self._expect("READY "))
        with np.load(out, allow_pickle=False) as z:
            self.outputs = {k: z[k] for k in z.files}
        self.times: list[float] = []
        self.cpu: list[float] = []  #: process CPU seconds per call, per block (every thread, spinning included)

    def _expect(self, tag: str) -> str:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith(tag):
            self.close()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"{self.side}: {(line + err).strip()[-1500:]}")
        return line[len(tag):]

    def block(self, n: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        times, cpu = json.loads(self._expect("TIMES "))
        self.times.extend(times)
        self.cpu.append(cpu)

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def model_feeds(spec: tm.Spec, path: Path) -> tuple[dict[str, np.ndarray], dict[str, list[int]]]:
    """The first step's feeds by LiteRT input name, the carried state inputs at their initial
    values (nnrt's names), and the input shapes to build for (inputs with free dimensions)."""
    ref = tm.LiteRT(path, spec.input_shapes)
    steps = spec.feeds(ref.inputs)
    feeds = {d["name"]: x for d, x in zip(ref.inputs, steps[0])}
    feeds.update({k: v for k, (v, _) in tm.initial_state(path).items()})
    shapes = {d["name"]: list(s) for d, s in zip(ref.inputs, spec.input_shapes or ())}
    return feeds, shapes


def accuracy(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    """Worst output's max |got - want| / max |want| (integer outputs: max |got - want| in steps);
    outputs paired by name, else by position (nnrt adds the carried state outputs at the end)."""
    keys = list(want)
    mine = [got[k] for k in keys] if set(keys) <= set(got) else list(got.values())[:len(keys)]
    worst = 0.0
    for a, b in zip(mine, (want[k] for k in keys)):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a64.shape != b64.shape:
            return math.inf
        if not b64.size:
            continue
        err = float(np.abs(a64 - b64).max())
        worst = max(worst, err if np.issubdtype(np.asarray(b).dtype, np.integer)
                    else err / max(float(np.abs(b64).max()), 1e-30))
    return worst


def bench(spec: tm.Spec, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    feeds, shapes = model_feeds(spec, path)
    row: dict[str, Any] = {"model": spec.key, "kind": spec.kind}
    with tempfile.TemporaryDirectory() as tmp:
        fpath = Path(tmp) / "feeds.npz"
        np.savez(fpath, **feeds)
        workers: list[Worker] = []
        try:
            for side in args.sides:
                try:
                    workers.append(Worker(side, path, shapes, fpath, Path(tmp) / f"{side}.npz",
                                          args.threads or args.litert_threads, args.threads))
                except RuntimeError as e:
                    row.setdefault("failed", {})[side] = " ".join(str(e).split())[-300:]
            by = {w.side: w for w in workers}
            if "litert" not in by or "nnrt" not in by:
                return row
            start, rounds = time.perf_counter(), 0
            while rounds < args.max_rounds and (rounds < args.min_rounds or time.perf_counter() - start < args.budget):
                for w in (workers if rounds % 2 == 0 else workers[::-1]):
                    w.block(args.runs)
                rounds += 1
            row["rounds"] = rounds
            row["ms"] = {w.side: statistics.median(w.times) * 1e3 for w in workers}
            row["cpu_ms"] = {w.side: statistics.median(w.cpu) * 1e3 for w in workers}
            row["chosen"] = by["nnrt"].info.get("chosen")
            row["err_vs_litert"] = accuracy(by["nnrt"].outputs, by["litert"].outputs)
            for side in ("raw_ort", "raw_ov"):
                if side in by:
                    row[f"err_{side}_vs_litert"] = accuracy(by[side].outputs, by["litert"].outputs)
        finally:
            for w in workers:
                w.close()
    ms = row["ms"]
    row["vs_litert"] = ms["nnrt"] / ms["litert"]
    row["cpu_vs_litert"] = row["cpu_ms"]["nnrt"] / max(row["cpu_ms"]["litert"], 1e-9)
    raws = [ms[s] for s in ("raw_ort", "raw_ov") if s in ms]
    if raws:
        row["vs_best_raw"] = ms["nnrt"] / min(raws)
    return row


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else math.nan


def report(rows: list[dict[str, Any]], load0: float, load1: float, args: argparse.Namespace) -> None:
    threads = (f"every side {args.threads} thread(s)" if args.threads else
               f"LiteRT num_threads={args.litert_threads}, the others their defaults")
    print(f"\nload average {load0:.1f} before, {load1:.1f} after; {os.cpu_count()} CPUs; {threads}; medians "
          f"of blocks of {args.runs} calls, interleaved, one process per side; ms = wall time per call")
    print(f"{'model':<26}{'litert':>8}{'nnrt':>8}{'raw ORT':>8}{'raw OV':>8}{'x litert':>9}{'x raw':>7}"
          f"{'cpu x':>7}{'err':>9}  chosen")
    for r in rows:
        if "ms" not in r:
            print(f"{r['model']:<26}  not timed: {json.dumps(r.get('failed', {}))[:160]}")
            continue
        ms = r["ms"]
        cell = lambda s: f"{ms[s]:>8.3g}" if s in ms else f"{'-':>8}"  # noqa: E731
        raw = f"{r['vs_best_raw']:>7.2f}" if "vs_best_raw" in r else f"{'-':>7}"
        print(f"{r['model']:<26}{cell('litert')}{cell('nnrt')}{cell('raw_ort')}{cell('raw_ov')}"
              f"{r['vs_litert']:>9.2f}{raw}{r['cpu_vs_litert']:>7.2f}{r['err_vs_litert']:>9.1e}  {r['chosen']}")
    timed = [r for r in rows if "ms" in r]
    print(f"geomean over {len(timed)} models: nnrt / LiteRT {geomean([r['vs_litert'] for r in timed]):.3f}, "
          f"nnrt / best raw engine {geomean([r['vs_best_raw'] for r in timed if 'vs_best_raw' in r]):.3f}, "
          f"CPU time nnrt / LiteRT {geomean([r['cpu_vs_litert'] for r in timed]):.3f}")
    print("x litert, x raw: nnrt's wall time / LiteRT's, / the faster raw engine's; cpu x: nnrt's process CPU time "
          "per call / LiteRT's (every thread, spin-waiting included: on a busy machine it tracks the work done "
          "better than wall time); err = max|nnrt - litert| / max|litert| over the outputs (integer outputs: "
          "steps).  The target (issue 33): the geomean of nnrt / LiteRT <= 1.")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default=None, help="as in tflite_models.py (default $NNRT_TFLITE_MODELS "
                    "or /tmp/tflite_models)")
    ap.add_argument("--models", default="", help="comma-separated substrings of model keys")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated subset of " + ",".join(SIDES))
    ap.add_argument("--litert-threads", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="threads for every side (nnrt's num_threads, ORT's "
                    "intra_op_num_threads, OpenVINO's INFERENCE_NUM_THREADS; 0 = their defaults, LiteRT "
                    "--litert-threads): --threads 1 compares the kernels on a busy machine")
    ap.add_argument("--runs", type=int, default=10, help="timed calls per block")
    ap.add_argument("--budget", type=float, default=4.0, help="seconds of timing per model (after the builds)")
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--max-rounds", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    args.sides = [s for s in args.sides.split(",") if s]
    if not {"litert", "nnrt"} <= set(args.sides) or not set(args.sides) <= set(SIDES):
        ap.error(f"--sides must include litert and nnrt, within {','.join(SIDES)}")
    root = tm.models_dir(args.models_dir)
    wanted = [w for w in args.models.split(",") if w]
    specs = [s for s in tm.SPECS if (not wanted or any(w in s.key for w in wanted))
             and tm.shipped_path(root, s).is_file()]
    if not specs:
        print(f"no models under {root}: run benchmarks/tflite_models.py --download first")
        return 1
    load0 = os.getloadavg()[0]
    rows = []
    for s in specs:
        try:
            rows.append(bench(s, tm.model_path(root, s), args))
        except Exception as e:  # noqa: BLE001 - LiteRT cannot make feeds for it: listed, not timed
            rows.append({"model": s.key, "failed": {"feeds": tm.short_error(e)}})
        print(f"  {s.key}: {json.dumps({k: v for k, v in rows[-1].items() if k in ('ms', 'chosen', 'failed')})[:200]}",
              file=sys.stderr, flush=True)
    report(rows, load0, os.getloadavg()[0], args)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
