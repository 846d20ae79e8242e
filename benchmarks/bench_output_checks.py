"""Cost of the executor's per-run check of partition outputs
(:mod:`nnrt_core.runtime.output_check`).

Two sessions of the same model: one as built (every partition's outputs
checked against the declared names, dtypes and static dims), one whose
executor checks are replaced by a no-op.  Calls are interleaved in short
blocks (the order flips every round); medians are reported with the ratio and
the median of the paired per-round differences, next to an A/A control (two
checked sessions) that shows the noise floor.  Target: the check costs at most 2 us per run on a
one-node model.

    python benchmarks/bench_output_checks.py [--rounds N] [--inner N]

* ``add_1x16``: one Add on 1x16 floats, NumPy backend (the single-partition
  fast path);
* ``chain (3 part)``: Relu -> Neg -> Abs on 3x64 floats pinned to numpy,
  onnxruntime, numpy: three partitions (the sequential path, three checks per
  run);
* ``check alone``: the bare ``OutputCheck`` call on the add's outputs.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper

from nnrt_core import ScheduleConfig, Session


def add_model() -> bytes:
    g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"], name="add")], "add",
        [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [1, 16]),
         helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, [1, 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def chain_model() -> bytes:
    nodes = [helper.make_node("Relu", ["x"], ["t0"], name="relu0"),
             helper.make_node("Neg", ["t0"], ["t1"], name="neg1"),
             helper.make_node("Abs", ["t1"], ["y"], name="abs2")]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 64])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 64])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _identity(outs: Any) -> Any:
    return outs


def unchecked(sess: Session) -> Session:
    """``sess`` with its executor's output checks replaced by no-ops."""
    ex = sess.executor
    ex.checks = [_identity] * len(ex.checks)
    return sess


def interleave(a: Callable[[], object], b: Callable[[], object], rounds: int,
               inner: int) -> tuple[float, float, float]:
    """Median seconds per call of ``a`` and ``b`` over ``rounds`` pairs of
    blocks of ``inner`` calls (order flipped every round), and the median of
    the paired differences ``a - b`` (robust to load that drifts between rounds)."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(rounds):
        for fn, out in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            out.append((time.perf_counter() - t0) / inner)
    return statistics.median(ta), statistics.median(tb), statistics.median(x - y for x, y in zip(ta, tb))


def report(name: str, checked: float, plain: float, diff: float) -> None:
    print(f"{name:<16} checked {checked * 1e6:8.3f} us   unchecked {plain * 1e6:8.3f} us   "
          f"ratio {checked / plain:.3f}   paired difference {diff * 1e6:+7.3f} us/run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=201)
    ap.add_argument("--inner", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    data = add_model()
    cfg = ScheduleConfig(backends=["numpy"])
    feeds = {"a": rng.random((1, 16), dtype=np.float32), "b": rng.random((1, 16), dtype=np.float32)}
    checked, plain, again = Session(data, cfg), unchecked(Session(data, cfg)), Session(data, cfg)
    assert len(checked.executor.steps) == 1
    np.testing.assert_array_equal(checked.run(feeds)["c"], plain.run(feeds)["c"])
    report("add_1x16", *interleave(lambda: checked.run(feeds), lambda: plain.run(feeds), args.rounds, args.inner))
    # A/A control: two checked sessions; its difference is the noise floor of this machine now
    report("add_1x16 (A/A)", *interleave(lambda: checked.run(feeds), lambda: again.run(feeds), args.rounds,
                                         args.inner))

    data = chain_model()
    pins = {"relu0": "numpy", "neg1": "onnxruntime", "abs2": "numpy"}
    cfg = ScheduleConfig(backends=["numpy", "onnxruntime"], pins=pins)
    x = {"x": rng.standard_normal((3, 64), dtype=np.float32)}
    checked, plain = Session(data, cfg), unchecked(Session(data, cfg))
    np.testing.assert_array_equal(checked.run(x)["y"], plain.run(x)["y"])
    report(f"chain ({len(checked.executor.steps)} part)",
           *interleave(lambda: checked.run(x), lambda: plain.run(x), args.rounds, args.inner))

    check = Session(add_model(), ScheduleConfig(backends=["numpy"])).executor.checks[0]
    outs = {"c": np.zeros((1, 16), np.float32)}
    report("check alone", *interleave(lambda: check(outs), lambda: _identity(outs), args.rounds, args.inner * 5))


if __name__ == "__main__":
    main()
