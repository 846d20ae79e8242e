"""Conv + per-value tail chains on the NumPy backend: the tails run per piece of a
split convolution (``epilogue=``, nnrt_numpy/fusion.py) against after the whole
convolution (the previous way), in one process, call by call.

    python benchmarks/ab/bench_conv_epilogue.py [--runs 200] [--threads 2]

Each row: one fused Conv -> tail step (a ``GraphProgram`` of a two-node model),
built twice (``Conv.accepts_epilogue`` on and off), timed alternately with the
split kernels' thread limit set to ``--threads`` (not adaptive: the second core
is used whether idle or not), median wall µs and CPU µs of the calling thread of
each, and the ratio per-piece / after.  The 1-minute load average is printed:
with other jobs on the cores the wall figures measure them too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import nnrt_numpy.backend  # noqa: F401  (registers the kernels)
from nnrt_core import load_model
from nnrt_numpy import parallel
from nnrt_numpy.ops.nn.conv import Conv
from nnrt_numpy.program import GraphProgram

#: (label, input shape, output channels, kernel, tail op) -- PP-OCRv6 rec tiny's 1x1 + GELU convs, det's 3x3
SHAPES = [("1x1 160->320 3x80 + Gelu", (1, 160, 3, 80), 320, 1, "Gelu"),
          ("1x1 96->192 6x80 + Gelu", (1, 96, 6, 80), 192, 1, "Gelu"),
          ("1x1 48->96 12x80 + Gelu", (1, 48, 12, 80), 96, 1, "Gelu"),
          ("3x3 24->48 s1 24x160 + Gelu", (1, 24, 24, 160), 48, 3, "Gelu"),
          ("1x1 96->192 6x80 + HardSwish", (1, 96, 6, 80), 192, 1, "HardSwish"),
          ("3x3 96->24 80x120 b8 + Relu", (8, 96, 80, 120), 24, 3, "Relu")]


def program(xs: tuple, m: int, k: int, tail: str) -> GraphProgram:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((m, xs[1], k, k)) / np.sqrt(xs[1] * k * k)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[k // 2] * 4), helper.make_node(tail, ["c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [xs[0], m, xs[2], xs[3]])],
                          [numpy_helper.from_array(w, "w")])
    mo = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    mo.ir_version = 9
    return GraphProgram(load_model(mo).graph)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    parallel.start_helpers()
    prev = parallel.set_threads(args.threads)
    print(f"load {os.getloadavg()[0]:.2f}, threads {args.threads}")
    print(f"{'chain':<32} {'after wall':>10} {'piece wall':>10} {'ratio':>6} {'after cpu':>10} {'piece cpu':>10}")
    try:
        for label, xs, m, k, tail in SHAPES:
            x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
            Conv.accepts_epilogue = False
            after = program(xs, m, k, tail)
            Conv.accepts_epilogue = True
            piece = program(xs, m, k, tail)
            np.testing.assert_allclose(piece.run([x])[0], after.run([x])[0], rtol=1e-4, atol=1e-5)
            t = {"a": [], "p": [], "ac": [], "pc": []}
            runs = max(3, args.runs // max(1, int(np.prod(xs)) // 200_000))
            for _ in range(runs):
                for key, prog in (("a", after), ("p", piece)):
                    w0, c0 = time.perf_counter(), time.thread_time()
                    prog.run([x])
                    t[key].append(time.perf_counter() - w0)
                    t[key + "c"].append(time.thread_time() - c0)
            med = {key: statistics.median(v) * 1e6 for key, v in t.items()}
            print(f"{label:<32} {med['a']:10.1f} {med['p']:10.1f} {med['p'] / med['a']:6.2f} "
                  f"{med['ac']:10.1f} {med['pc']:10.1f}", flush=True)
    finally:
        parallel.set_threads(*prev)
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
