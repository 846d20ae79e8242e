"""ONNX Runtime's float32 ``Sigmoid`` and global ``AveragePool`` against
float64, and against what the onnxruntime backend exports instead
(``nnrt_onnxruntime/precise.py``): ``1 / (1 + exp(-x))`` (relative error per
input range, and the run-time cost: median of interleaved runs, with the
ratio) and ``ReduceMean`` (relative error on 64x64 windows).

    python benchmarks/ab/bench_ort_precise.py [--size 1000000] [--runs 21]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import onnxruntime as ort

from nnrt_core.frontends.onnx import proto_build as helper
from nnrt_core.frontends.onnx.onnx_lite import P


def session(nodes: list, extra: list, n: int) -> ort.InferenceSession:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", P.TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("y", P.TensorProto.FLOAT, [n])])
    g.initializer.extend(extra)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def both(n: int) -> dict[str, ort.InferenceSession]:
    one = helper.from_array(np.array(1.0, np.float32), "one")
    return {
        "Sigmoid": session([helper.make_node("Sigmoid", ["x"], ["y"])], [], n),
        "1/(1+exp(-x))": session([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Exp", ["n"], ["e"]),
                                  helper.make_node("Add", ["e", "one"], ["d"]),
                                  helper.make_node("Reciprocal", ["d"], ["y"])], [one], n),
    }


def pooling() -> None:
    """A 64x64 global average pool of NCHW data in [0.5, 1.5]: AveragePool vs ReduceMean."""
    x = np.random.default_rng(1).uniform(0.5, 1.5, (1, 16, 64, 64)).astype(np.float32)
    exact = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    axes = helper.from_array(np.array([2, 3], np.int64), "axes")
    cands = {"AveragePool": ([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[64, 64])], []),
             "GlobalAveragePool": ([helper.make_node("GlobalAveragePool", ["x"], ["y"])], []),
             "ReduceMean": ([helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)], [axes])}
    print("global average pool of (1, 16, 64, 64) NCHW values in [0.5, 1.5]: max relative error against float64")
    for name, (nodes, extra) in cands.items():
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", P.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", P.TensorProto.FLOAT, None)])
        g.initializer.extend(extra)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        print(f"  {name:18s} {float(np.abs(got - exact).max() / np.abs(exact).max()):.2e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000, help="elements per timed run")
    ap.add_argument("--runs", type=int, default=21)
    a = ap.parse_args()
    x = np.linspace(-30, 30, 600_001, dtype=np.float32)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    print(f"onnxruntime {ort.__version__}: max relative error against float64 on a 600001-point sweep")
    for name, s in both(x.size).items():
        rel = np.abs(s.run(None, {"x": x})[0] - exact) / exact
        for lo, hi in ((-30, -9), (-9, 0), (0, 30)):
            sel = (x >= lo) & (x < hi)
            k = int(rel[sel].argmax())
            print(f"  {name:14s} x in [{lo:3d}, {hi:3d}): {rel[sel].max():.2e} (worst at x = {x[sel][k]:.3f})")
    xs = np.random.default_rng(0).uniform(-10, 10, a.size).astype(np.float32)
    sess = both(a.size)
    times: dict[str, list[float]] = {k: [] for k in sess}
    for _ in range(a.runs):
        for k, s in sess.items():
            t = time.process_time()
            s.run(None, {"x": xs})
            times[k].append((time.process_time() - t) * 1e3)
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"CPU ms per run, {a.size} elements, 1 thread, median of {a.runs} (load average "
          f"{os.getloadavg()[0]:.2f}):")
    for k, v in med.items():
        print(f"  {k:14s} {v:7.3f}")
    print(f"  ratio {med['1/(1+exp(-x))'] / med['Sigmoid']:.2f}x")
    pooling()


if __name__ == "__main__":
    main()
