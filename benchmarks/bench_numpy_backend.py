"""NumPy backend vs ONNX Runtime (CPU provider), interleaved in one process.

    python benchmarks/bench_numpy_backend.py [--runs N] [--models a,b] [--interleave call|block|both] [--json]

For every onnx `light` model it runs nnrt and ORT on the same input, reports
per-model medians and the ratio nnrt / ORT, and the geometric mean of the
ratios.  Two ways of alternating the two sides (ORT's settings are never
changed):

* ``call`` (the default): one nnrt call, one ORT call, ``--runs`` times.
  Each side starts right after the other: ORT's intra-op pool keeps
  spinning for about 40 ms after each of its runs, so on a 2-core machine
  the nnrt run that follows has one free core for most models.
* ``block``: ``--runs`` rounds of a block of k nnrt calls, then a block of k
  ORT calls; the first call of each block is discarded.  k is chosen per
  model so that a block lasts at least ``--block-ms`` (default 200 ms, at
  least 4 calls), so most of a block's calls run after the other side's
  threads went idle: each side as it runs alone, back to back.

``both`` measures the two modes one after the other and reports both.

``--gemm-bound`` instead times only the convolutions' GEMMs: numpy matmul on
exactly the (weights x im2col columns) shapes the NumPy backend multiplies
for each model, with one OpenBLAS thread, two OpenBLAS threads, and split
over two threads by nnrt_numpy.parallel, against ORT's whole model (runs
back to back).  No NumPy-backend run can be faster than its GEMMs, so this is
a lower bound on the ratio.  A
one-node model (Add on 1x16 floats) measures per-call overhead call by call.
The 1-minute load average before and after is printed too: on a shared
machine it says how much the numbers can be trusted (the NumPy backend uses
as many threads as cores are idle, see plugins/numpy/nnrt_numpy/blas.py and
parallel.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from nnrt_core import ScheduleConfig, Session

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
          "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def one_node_model() -> bytes:
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "add",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 16]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10  # onnx writes a newer IR than onnxruntime accepts
    return m.SerializeToString()


def interleaved(nnrt_call, ort_call, runs: int, inner: int = 1) -> tuple[float, float]:
    """Median seconds per call of each side, alternating the two."""
    nnrt_call(), ort_call()  # warm up
    a, b = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(inner):
            nnrt_call()
        t1 = time.perf_counter()
        for _ in range(inner):
            ort_call()
        t2 = time.perf_counter()
        a.append((t1 - t0) / inner)
        b.append((t2 - t1) / inner)
    return statistics.median(a), statistics.median(b)


def blocks(nnrt_call, ort_call, rounds: int, block_s: float = 0.2, min_k: int = 4) -> tuple[float, float, int]:
    """Median seconds per call of each side, alternating blocks of k calls per
    side (the first call of every block discarded), and k."""
    t0 = time.perf_counter()
    nnrt_call()
    t1 = time.perf_counter()
    ort_call()
    t2 = time.perf_counter()
    k = max(min_k, min(50, int(math.ceil(block_s / max(1e-6, min(t1 - t0, t2 - t1))))))
    a, b = [], []
    for _ in range(rounds):
        for call, acc in ((nnrt_call, a), (ort_call, b)):
            for i in range(k):
                s0 = time.perf_counter()
                call()
                if i:
                    acc.append(time.perf_counter() - s0)
    return statistics.median(a), statistics.median(b), k


def gemm_shapes(sess: Session, feeds: dict) -> list[tuple[int, int, int, int]]:
    """(groups, M, K, N) of every im2col / pointwise GEMM of one run (depthwise convs excluded)."""
    from nnrt_numpy.ops.nn import conv as convmod

    shapes: dict[int, tuple[int, int, int, int]] = {}
    orig = convmod.Conv._run

    def record(self, x, w, b, dest=None):
        nd, kernel, strides, dil, begin, end, out, pointwise, depthwise = self._plan(x.shape, w.shape)
        g = self.group
        if not depthwise:
            shapes.setdefault(id(self), (g * x.shape[0], w.shape[0] // g, (x.shape[1] // g) * int(np.prod(kernel)),
                                         int(np.prod(out))))
        return orig(self, x, w, b, dest)

    convmod.Conv._run = record
    try:
        sess.run(feeds)
    finally:
        convmod.Conv._run = orig
    return list(shapes.values())


def gemm_bound(names: list[str], runs: int, so: "ort.SessionOptions") -> list[dict]:
    from threadpoolctl import threadpool_limits

    from nnrt_numpy import parallel

    rows = []
    rng = np.random.default_rng(0)
    for name in names:
        path = LIGHT / f"light_{name}.onnx"
        sess = Session(path, ScheduleConfig(backends=["numpy"]))
        inp = sess.inputs[0]
        feeds = {inp.name: rng.random(tuple(inp.shape), dtype=np.float32)}
        shapes = gemm_shapes(sess, feeds)
        mats = [(rng.random((g, m, k), dtype=np.float32), rng.random((g, k, n), dtype=np.float32),
                 np.empty((g, m, n), np.float32)) for g, m, k, n in shapes]
        flops = 2 * sum(g * m * k * n for g, m, k, n in shapes)
        ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

        def plain():
            for a, b, c in mats:
                np.matmul(a, b, out=c)

        def split():
            for a, b, c in mats:
                parallel.matmul(a, b, out=c)

        def timed(fn, n):
            fn()
            ts = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            return statistics.median(ts)

        res = {}
        for _ in range(2):  # two rounds, keep the better median of each
            with threadpool_limits(1, "blas"):
                res["gemm_1t_ms"] = min(res.get("gemm_1t_ms", 1e9), timed(plain, runs) * 1e3)
                prev = parallel.set_threads(2)
                try:
                    res["gemm_split2_ms"] = min(res.get("gemm_split2_ms", 1e9), timed(split, runs) * 1e3)
                finally:
                    parallel.set_threads(*prev)
            with threadpool_limits(2, "blas"):
                res["gemm_openblas2_ms"] = min(res.get("gemm_openblas2_ms", 1e9), timed(plain, runs) * 1e3)
            time.sleep(0.1)  # let OpenBLAS's workers go idle before ORT runs
            res["ort_ms"] = min(res.get("ort_ms", 1e9), timed(lambda: ref.run(None, feeds), runs) * 1e3)
            time.sleep(0.1)  # and ORT's pool
        rows.append({"model": name, "gemms": len(shapes), "gflop": flops / 1e9, **res})
    return rows


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--interleave", choices=["call", "block", "both"], default="call",
                    help="alternate call by call, in blocks of calls, or measure both ways")
    ap.add_argument("--block-ms", type=float, default=200.0, help="least duration of a block (block mode)")
    ap.add_argument("--gemm-bound", action="store_true",
                    help="time only the conv GEMMs (1 and 2 threads) against ORT's whole model")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    so = ort.SessionOptions()
    load_before = _load()
    if not args.json:
        print(f"load average (1 min) {load_before:.2f} on {os.cpu_count()} cores", flush=True)
    if args.gemm_bound:
        rows = gemm_bound(args.models.split(","), args.runs, so)
        if args.json:
            print(json.dumps({"gemm_bound": rows, "load_average": [load_before, _load()]}, indent=2))
            return 0
        for r in rows:
            o = r["ort_ms"]
            print(f"{r['model']:<14} {r['gemms']:3d} GEMMs {r['gflop']:6.2f} GFLOP | GEMMs only: 1 thread "
                  f"{r['gemm_1t_ms']:7.2f} ms ({r['gemm_1t_ms'] / o:.2f}x ORT), 2 OpenBLAS threads "
                  f"{r['gemm_openblas2_ms']:7.2f} ms ({r['gemm_openblas2_ms'] / o:.2f}x), split over 2 threads "
                  f"{r['gemm_split2_ms']:7.2f} ms ({r['gemm_split2_ms'] / o:.2f}x) | ORT whole model {o:7.2f} ms")
        print(f"load average (1 min) after: {_load():.2f}")
        return 0
    modes = ["call", "block"] if args.interleave == "both" else [args.interleave]
    rows = []
    for name in args.models.split(","):
        path = LIGHT / f"light_{name}.onnx"
        sess = Session(path, ScheduleConfig(backends=["numpy"]))
        ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        inp = sess.inputs[0]
        x = np.random.default_rng(0).random(tuple(inp.shape), dtype=np.float32)
        feeds = {inp.name: x}
        row: dict = {"model": name}
        line = f"{name:<14}"
        for mode in modes:
            if mode == "call":
                ours, theirs = interleaved(lambda: sess.run(feeds), lambda: ref.run(None, feeds), args.runs)
                extra = ""
            else:
                ours, theirs, k = blocks(lambda: sess.run(feeds), lambda: ref.run(None, feeds), args.runs,
                                         args.block_ms / 1e3)
                row["block_k"] = k
                extra = f" (k={k})"
            key = "" if mode == "call" else "block_"
            row.update({f"{key}nnrt_ms": ours * 1e3, f"{key}ort_ms": theirs * 1e3, f"{key}ratio": ours / theirs})
            line += (f"  [{mode}{extra}] nnrt {ours * 1e3:8.2f} ms  ort {theirs * 1e3:8.2f} ms"
                     f"  ratio {ours / theirs:5.2f}")
        rows.append(row)
        if not args.json:
            print(line, flush=True)
    geo = {}
    for mode in modes:
        key = "ratio" if mode == "call" else "block_ratio"
        geo[mode] = float(np.exp(np.mean([np.log(r[key]) for r in rows])))
    blob = one_node_model()
    sess = Session(blob, ScheduleConfig(backends=["numpy"]))
    ref = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    feeds = {"a": np.ones((1, 16), np.float32), "b": np.ones((1, 16), np.float32)}
    ours, theirs = interleaved(lambda: sess.run(feeds), lambda: ref.run(None, feeds), 50, inner=200)
    result = {"models": rows, "load_average": [load_before, _load()],
              "one_node": {"nnrt_us": ours * 1e6, "ort_us": theirs * 1e6, "ratio": ours / theirs}}
    if "call" in geo:
        result["geomean_ratio"] = geo["call"]
    if "block" in geo:
        result["block_geomean_ratio"] = geo["block"]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for mode, g in geo.items():
            print(f"geometric-mean ratio nnrt/ort over {len(rows)} models ({mode}): {g:.2f}")
        print(f"one-node Add 1x16: nnrt {ours * 1e6:.1f} us   ort {theirs * 1e6:.1f} us   ratio {ours / theirs:.2f}")
        print(f"load average (1 min) after: {result['load_average'][1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
