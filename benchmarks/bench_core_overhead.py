"""Core overhead: per-call time of a one-node model and session build time,
against ONNX Runtime measured in the same run.

Both sides are interleaved (the order flips every iteration) and medians are
reported with the nnrt/ORT ratio.  Use it to check that a change of the core
(session, build stages, executor) costs nothing per call or per build:

    python benchmarks/bench_core_overhead.py [--calls N] [--builds N]

* ``add_1x16 numpy``: ``Session.run`` of one Add on 1x16 floats, NumPy backend,
  vs ``InferenceSession.run`` of the same model;
* ``add_1x16 onnxruntime``: the same through the ORT delegate;
* ``build <model> <backend>``: ``Session(model, backends=[backend])`` from
  bytes vs ``InferenceSession(bytes)`` (``light`` models of the onnx wheel).
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from nnrt_core import ScheduleConfig, Session

ort.set_default_logger_severity(3)  # the light models carry an unused initializer ORT warns about

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def add_model() -> bytes:
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"], name="add")], "add",
        [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [1, 16]),
         helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, [1, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def ort_session(data: bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def interleave(a: Callable[[], object], b: Callable[[], object], rounds: int, inner: int) -> tuple[float, float]:
    """Median seconds per call of ``a`` and ``b`` over ``rounds`` blocks of ``inner`` calls, order flipped."""
    ta, tb = [], []
    for i in range(rounds):
        for first in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            fn, out = first
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            out.append((time.perf_counter() - t0) / inner)
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=41, help="rounds of 200 calls per side")
    ap.add_argument("--builds", type=int, default=7, help="session builds per side and model")
    args = ap.parse_args()
    rows = []
    data = add_model()
    feeds = {"a": np.ones((1, 16), np.float32), "b": np.ones((1, 16), np.float32)}
    raw = ort_session(data)
    for backend in ("numpy", "onnxruntime"):
        sess = Session(data, ScheduleConfig(backends=[backend], num_threads=1))
        gc.disable()
        mine, theirs = interleave(lambda: sess.run(feeds), lambda: raw.run(None, feeds), args.calls, 200)
        gc.enable()
        rows.append((f"add_1x16 {backend} (per call)", mine * 1e6, theirs * 1e6, "us"))
    for name in ("squeezenet", "resnet50"):
        with open(os.path.join(LIGHT, f"light_{name}.onnx"), "rb") as f:
            model = f.read()
        for backend in ("numpy", "onnxruntime"):
            cfg = ScheduleConfig(backends=[backend], num_threads=1)
            mine, theirs = interleave(lambda: Session(model, cfg), lambda: ort_session(model), args.builds, 1)
            rows.append((f"build {name} {backend}", mine * 1e3, theirs * 1e3, "ms"))
    print(f"{'case':34s} {'nnrt':>10s} {'ORT':>10s} {'ratio':>7s}")
    for label, mine, theirs, unit in rows:
        print(f"{label:34s} {mine:8.2f}{unit} {theirs:8.2f}{unit} {mine / theirs:7.2f}")


if __name__ == "__main__":
    main()
