"""Where a 2-way split pays, per kind of splitting kernel of the NumPy backend.

    python benchmarks/ab/bench_split_ops.py [--kinds gemm1x1,conv3x3,dw3x3,matmul,softmax,conv1x1_gelu]
        [--reps 41] [--rounds 3]

For every kind a ladder of one-node (or one-chain) ONNX models of growing
size runs in two sessions: ``num_threads=1`` and ``num_threads=2`` with every
split forced (``nnrt_numpy.parallel.SPLIT_US`` and ``COLD_SPLIT_US`` 0: each kernel splits
whatever its size, into the pieces it would cut at that size).  The two are
alternated call by call; printed per size: the work (multiply-adds or
values), the estimated one-thread µs of that work by
:func:`nnrt_numpy.parallel.work_us`, the median wall µs of one and of two
threads and their ratio (< 1: the split pays), medians over ``--rounds``
rounds of ``--reps`` calls each, with the load average.  The size where the
ratio crosses 1 is the break-even :data:`nnrt_numpy.parallel.SPLIT_US` is
set from (docs/runtime.md).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

from nnrt_core import ScheduleConfig, Session
from nnrt_numpy import parallel


def _model(nodes, inits, x_shape, y_name="y"):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, [f"d{i}" for i in range(len(x_shape))])],
                          [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


def _rand(*shape) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def conv(c: int, m: int, hw: int, k: int, group: int = 1, tail: str | None = None):
    """Conv k x k (pad k // 2) of a (1, c, hw, hw) map to m channels; returns (model, x, MACs)."""
    w = _rand(m, c // group, k, k) * 0.1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y" if tail is None else "t"], group=group,
                              pads=[k // 2] * 4, kernel_shape=[k, k])]
    if tail is not None:
        nodes.append(helper.make_node(tail, ["t"], ["y"]))
    model = _model(nodes, {"w": w, "b": _rand(m)}, [1, c, hw, hw])
    return model, _rand(1, c, hw, hw), m * (c // group) * k * k * hw * hw


def matmul(t: int, kk: int, n: int):
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"w": _rand(kk, n) * 0.1}, [t, kk]), \
        _rand(t, kk), t * kk * n


def softmax(rows: int, n: int):
    """Softmax over (rows, n), beside a MatMul of n multiply-adds per row (a graph without a
    BLAS op does not set the run's thread limit: nnrt_numpy/backend.py)."""
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1), helper.make_node("MatMul", ["x", "v"], ["z"])]
    model = _model(nodes, {"v": _rand(n, 1)}, [rows, n])
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["r", 1]))
    return model, _rand(rows, n), rows * n


#: kind -> (work kind of parallel.work_us, [builders of growing size])
LADDERS = {
    "gemm1x1": ("gemm", [lambda s=s: conv(64, 64, s, 1) for s in (16, 24, 32, 40, 48, 64, 80)]),
    "conv1x1_gelu": ("gemm", [lambda s=s: conv(64, 64, s, 1, tail="Gelu") for s in (16, 24, 32, 40, 48, 64)]),
    "conv1x1_hswish": ("gemm", [lambda s=s: conv(64, 64, s, 1, tail="HardSwish") for s in (16, 24, 32, 40, 48, 64)]),
    "conv3x3": ("im2col", [lambda s=s: conv(32, 32, s, 3) for s in (12, 16, 20, 24, 32, 40, 48)]),
    "dw3x3": ("depthwise", [lambda s=s: conv(64, 64, s, 3, group=64) for s in (16, 24, 32, 48, 64, 96, 128)]),
    "matmul": ("gemm", [lambda n=n: matmul(40, 80, n) for n in (512, 1024, 2048, 3072, 4096, 6906)]),
    "softmax": ("softmax", [lambda r=r: softmax(r, 6906) for r in (8, 16, 32, 64, 128, 320)]),
}


def run_kind(kind: str, reps: int, rounds: int) -> None:
    wk, ladder = LADDERS[kind]
    print(f"\n{kind} (work as {wk}; load {os.getloadavg()[0]:.2f})")
    for build in ladder:
        model, x, work = build()
        saved = parallel.SPLIT_US, parallel.COLD_SPLIT_US
        parallel.SPLIT_US = parallel.COLD_SPLIT_US = 0.0  # forced: plans made at build split too
        try:
            s1 = Session(model.SerializeToString(), ScheduleConfig(backends=["numpy"], num_threads=1))
            s2 = Session(model.SerializeToString(), ScheduleConfig(backends=["numpy"], num_threads=2))
            feeds = {"x": x}
            med = {1: [], 2: []}
            for _ in range(rounds):
                t: dict[int, list] = {1: [], 2: []}
                for s in (s1, s2):
                    s.run(feeds)
                for _ in range(reps):
                    for k, s in ((1, s1), (2, s2)):
                        t0 = time.perf_counter()
                        s.run(feeds)
                        t[k].append(time.perf_counter() - t0)
                for k in (1, 2):
                    med[k].append(statistics.median(t[k]))
        finally:
            parallel.SPLIT_US, parallel.COLD_SPLIT_US = saved
        a1, a2 = (statistics.median(med[k]) * 1e6 for k in (1, 2))
        est = parallel.work_us(wk, work)
        if wk == "depthwise":  # plus the copies of the padded input planes (DepthwisePlan.est_us)
            est += parallel.work_us("dw_input", x.shape[1] * (x.shape[2] + 2) * (x.shape[3] + 2))
        print(f"  work {work / 1e6:7.2f} M  est {est:7.1f} us  one thread {a1:8.1f} us  "
              f"two (forced split) {a2:8.1f} us  ratio {a2 / a1:5.2f}  load {os.getloadavg()[0]:.2f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default=",".join(LADDERS))
    ap.add_argument("--reps", type=int, default=41)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for kind in args.kinds.split(","):
        run_kind(kind, args.reps, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
