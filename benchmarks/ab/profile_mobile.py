"""Per-op-type time of a mobile model on the NumPy backend against ONNX Runtime's own per-op profile.

    python benchmarks/ab/profile_mobile.py [--models ppocr_v6_rec_tiny,ppocr_v2_cls] [--batches 1,8] [--runs 15]
                                        [--threads N] [--top 12] [--per-node]

nnrt side: the NumPy partition's program steps (fused chains count as one
step, labelled by their op types) are wrapped in timers, so the figures are
those of the real fused program; per step the median over ``--runs`` runs of
wall time and of CPU time of the calling thread, summed per label. Conv is
split into ``Conv dw`` (depthwise), ``Conv 1x1`` and ``Conv kxk``.
"(between steps)" is the run's median wall time minus the sum of step
medians: the program loop, the executor and the session around it.

ORT side: ``SessionOptions.enable_profiling``, the ``Node`` events'
``dur`` per ``op_name`` (ORT fuses Conv + activation into ``FusedConv``),
median over the runs, plus ORT's whole ``model_run`` median.

The 1-minute load average is printed before and after each model.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import onnxruntime as ort

from nnrt_core import ScheduleConfig, Session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the shared benchmark modules
import real_models as rm  # noqa: E402


def _label(step) -> str:
    """The op type of a program step (chains: their op types joined by '+'; Conv split by kind)."""
    nodes = step.chain.nodes if step.chain is not None else [step.node]
    names = []
    for n in nodes:
        t = n.op_type
        if t in ("Conv", "FusedConv"):
            w = n.inputs[1].shape if len(n.inputs) > 1 and n.inputs[1] is not None else None
            g = n.attributes["group"].value if "group" in n.attributes else 1
            if w is not None and g > 1 and w[1] == 1:
                t += " dw"
            elif w is not None and all(k == 1 for k in w[2:]):
                t += " 1x1"
            else:
                t += " kxk"
        names.append(t)
    return "+".join(names)


def _programs(sess: Session) -> list:
    progs = []
    for part in sess.compiled_model.compiled:
        prog = getattr(part, "program", None)
        if prog is not None:
            progs.append(prog)
    return progs


def nnrt_profile(path: str, feeds: dict, runs: int, threads: int | None,
                 per_node: list | None = None) -> tuple[dict, float, int]:
    """{label: (wall ms, cpu ms, steps)}, median run ms, number of steps; with
    ``per_node`` a list, it gets (label, output shape, wall us, cpu us) per step."""
    cfg = ScheduleConfig(backends=["numpy"], **({"num_threads": threads} if threads else {}))
    sess = Session(path, cfg)
    times: dict[int, list] = defaultdict(list)
    labels: dict[int, str] = {}
    shapes: dict[int, str] = {}
    nsteps = 0
    for prog in _programs(sess):
        for st in prog.steps:
            k = nsteps
            labels[k] = _label(st)
            out = st.chain.output if st.chain is not None else st.node.outputs[0]
            shapes[k] = "x".join(str(d) for d in (out.shape or ())) if out is not None else "?"
            inner = st.kernel

            def timed(*a, _inner=inner, _k=k, **kw):
                t0, c0 = time.perf_counter(), time.thread_time()
                r = _inner(*a, **kw)
                times[_k].append((time.perf_counter() - t0, time.thread_time() - c0))
                return r

            st.kernel = timed
            nsteps += 1
    sess.run(feeds)
    sess.run(feeds)
    times.clear()
    total = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(feeds)
        total.append(time.perf_counter() - t0)
    by: dict[str, list] = defaultdict(lambda: [0.0, 0.0, 0])
    for k, ts in sorted(times.items()):
        if per_node is not None:
            per_node.append((labels[k], shapes[k], statistics.median(t[0] for t in ts) * 1e6,
                             statistics.median(t[1] for t in ts) * 1e6))
        e = by[labels[k]]
        e[0] += statistics.median(t[0] for t in ts) * 1e3
        e[1] += statistics.median(t[1] for t in ts) * 1e3
        e[2] += 1
    return dict(by), statistics.median(total) * 1e3, nsteps


def ort_profile(path: str, feeds: dict, runs: int, threads: int | None) -> tuple[dict, float]:
    """{op_name: (ms, nodes)} and the median model_run ms from ORT's own profiler."""
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(2):
        s.run(None, feeds)
    for _ in range(runs):
        s.run(None, feeds)
    events = json.loads(Path(s.end_profiling()).read_text())
    runs_ev = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][2:]
    per: dict[tuple, list] = defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per[(e["args"].get("op_name", "?"), e["name"])].append(e["dur"])
    by: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for (op, _), durs in per.items():
        by[op][0] += statistics.median(durs[2:] or durs) / 1e3
        by[op][1] += 1
    return dict(by), statistics.median(e["dur"] for e in runs_ev) / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ppocr_v6_rec_tiny,ppocr_v2_cls,ppocr_v4_det,ppocr_v4_rec")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None, help="nnrt num_threads and ORT intra_op_num_threads")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--per-node", action="store_true", help="also print every step: label, output shape, us")
    args = ap.parse_args()
    root = rm.models_dir(None)
    for name, path, b, feeds in rm.model_batches(args.models, args.batches, root):
        load0 = os.getloadavg()[0]
        nodes: list | None = [] if args.per_node else None
        ours, run_ms, nsteps = nnrt_profile(str(path), feeds, args.runs, args.threads, nodes)
        theirs, ort_ms = ort_profile(str(path), feeds, args.runs, args.threads)
        steps_ms = sum(v[0] for v in ours.values())
        print(f"\n{name} batch {b}: nnrt {run_ms:.2f} ms ({nsteps} steps, sum of steps {steps_ms:.2f} ms), "
              f"ORT {ort_ms:.2f} ms ({sum(v[1] for v in theirs.values())} nodes); "
              f"load {load0:.2f} -> {os.getloadavg()[0]:.2f}")
        print(f"  {'nnrt step':<44} {'n':>3} {'wall ms':>8} {'cpu ms':>7} {'us/step':>8}")
        for lab, (w, c, n) in sorted(ours.items(), key=lambda kv: -kv[1][0])[:args.top]:
            print(f"  {lab[:44]:<44} {n:3d} {w:8.3f} {c:7.3f} {w / n * 1e3:8.1f}")
        print(f"  {'(between steps)':<44} {'':>3} {run_ms - steps_ms:8.3f}")
        for i, (lab, shp, w, c) in enumerate(nodes or []):
            print(f"  step {i:3d} {lab[:40]:<40} {shp:<18} {w:8.1f} us wall {c:8.1f} us cpu")
        print(f"  {'ORT op':<44} {'n':>3} {'ms':>8}")
        for op, (ms, n) in sorted(theirs.items(), key=lambda kv: -kv[1][0])[:args.top]:
            print(f"  {op:<44} {n:3d} {ms:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
