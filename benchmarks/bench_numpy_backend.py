"""NumPy backend vs ONNX Runtime (CPU provider), interleaved in one process.

    python benchmarks/bench_numpy_backend.py [--runs N] [--models a,b] [--json]

For every onnx `light` model it alternates one nnrt call and one ORT call on
the same input, reports per-model medians and the ratio nnrt / ORT, and the
geometric mean of the ratios.  A one-node model (Add on 1x16 floats) measures
per-call overhead the same way.  The 1-minute load average before and after
is printed too: on a shared machine it says how much the numbers can be trusted
(the NumPy backend runs BLAS single-threaded while the machine is
oversubscribed, see plugins/numpy/nnrt_numpy/blas.py).
"""
from __future__ import annotations

import argparse
import json
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


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    so = ort.SessionOptions()
    load_before = _load()
    if not args.json:
        print(f"load average (1 min) {load_before:.2f} on {os.cpu_count()} cores", flush=True)
    rows = []
    for name in args.models.split(","):
        path = LIGHT / f"light_{name}.onnx"
        sess = Session(path, ScheduleConfig(backends=["numpy"]))
        ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        inp = sess.inputs[0]
        x = np.random.default_rng(0).random(tuple(inp.shape), dtype=np.float32)
        feeds = {inp.name: x}
        ours, theirs = interleaved(lambda: sess.run(feeds), lambda: ref.run(None, feeds), args.runs)
        rows.append({"model": name, "nnrt_ms": ours * 1e3, "ort_ms": theirs * 1e3, "ratio": ours / theirs})
        if not args.json:
            print(f"{name:<14} nnrt {ours * 1e3:9.2f} ms   ort {theirs * 1e3:9.2f} ms   ratio {ours / theirs:6.2f}",
                  flush=True)
    geo = float(np.exp(np.mean([np.log(r["ratio"]) for r in rows])))
    blob = one_node_model()
    sess = Session(blob, ScheduleConfig(backends=["numpy"]))
    ref = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    feeds = {"a": np.ones((1, 16), np.float32), "b": np.ones((1, 16), np.float32)}
    ours, theirs = interleaved(lambda: sess.run(feeds), lambda: ref.run(None, feeds), 50, inner=200)
    result = {"models": rows, "geomean_ratio": geo, "load_average": [load_before, _load()],
              "one_node": {"nnrt_us": ours * 1e6, "ort_us": theirs * 1e6, "ratio": ours / theirs}}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"geometric-mean ratio nnrt/ort over {len(rows)} models: {geo:.2f}")
        print(f"one-node Add 1x16: nnrt {ours * 1e6:.1f} us   ort {theirs * 1e6:.1f} us   ratio {ours / theirs:.2f}")
        print(f"load average (1 min) after: {result['load_average'][1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
