"""Where the time of a small ``.tflite`` model goes in ONNX Runtime: graph sizes and a per-call breakdown.

    python benchmarks/tflite_graph_cost.py [--models-dir DIR] [--models mww,oww] [--engines onnxruntime,openvino]

The models are those of ``benchmarks/tflite_models.py`` (``--download`` there
fetches them).  Per model it prints:

* ``ops``: the operators of the ``.tflite`` file (every subgraph);
* ``import``: the nodes of nnrt's import (``load_tflite``, no pass), ``nnrt``:
  after the session's passes (optimization level ``basic``), ``ort``: what
  ONNX Runtime runs after its own graph optimizations on nnrt's graph
  (``SessionOptions.optimized_model_filepath``);
* ``run us``: ONNX Runtime's median ``run`` of nnrt's graph (one thread), split
  into its fixed cost per call (a one-node graph), its cost per node (the slope
  of chains of 1..64 cheap nodes, times ``ort`` nodes) and the rest (kernels);
* per engine, the nnrt session at level ``none`` (the import as it is) and at
  ``basic``, interleaved in one process: medians in us and their ratio.

The machine's load average is printed: the figures are as good as the machine is quiet.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tflite_models as tm  # noqa: E402
import tflite_latency as tl  # noqa: E402


def median_us(fn: Callable[[], Any], calls: int = 400, warm: int = 50) -> float:
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def ort_session(data: bytes, optimized: str | None = None):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if optimized:
        so.optimized_model_filepath = optimized
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def ort_dispatch_cost() -> tuple[float, float]:
    """ONNX Runtime's fixed cost per run (one Relu on 1 float) and its cost per extra node (slope over chains)."""
    from onnx import TensorProto, helper
    x = {"x": np.zeros((1, 1), np.float32)}
    points = []
    for n in (1, 16, 64):
        nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(n)]
        nodes[0].input[0] = "x"
        g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                              [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [1, 1])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        s = ort_session(m.SerializeToString())
        points.append((n, median_us(lambda: s.run(None, x), 2000)))
    slope = float(np.polyfit([p[0] for p in points], [p[1] for p in points], 1)[0])
    return points[0][1], slope


def graph_sizes(path: Path, shapes: dict[str, list[int]]) -> tuple[int, Any]:
    """(imported node count, the nnrt session at level basic on ONNX Runtime)."""
    from nnrt_core import ScheduleConfig, Session
    from nnrt_core.frontends.tflite import load_tflite
    imported = len(load_tflite(str(path), input_shapes=shapes or None).graph.nodes)
    sess = Session(str(path), ScheduleConfig(backends=["onnxruntime"], num_threads=1, input_shapes=shapes or None))
    return imported, sess


def ort_breakdown(graph_model, feeds: dict[str, np.ndarray], fixed: float, per_node: float) -> dict[str, float]:
    import onnx
    from nnrt_core.frontends import to_onnx
    data = to_onnx(graph_model).SerializeToString()
    with tempfile.TemporaryDirectory() as tmp:
        opt = os.path.join(tmp, "opt.onnx")
        s = ort_session(data, opt)
        ort_nodes = len(onnx.load(opt).graph.node)
    names = [i.name for i in s.get_inputs()]
    mine = {k: v for k, v in feeds.items() if k in names}
    run = median_us(lambda: s.run(None, mine), 1000)
    return {"ort_nodes": ort_nodes, "run": run, "fixed": fixed, "nodes_cost": per_node * ort_nodes,
            "kernels": max(run - fixed - per_node * ort_nodes, 0.0)}


def level_ab(path: Path, shapes: dict[str, list[int]], feeds: dict[str, np.ndarray], engines: list[str],
             rounds: int = 12) -> dict[tuple[str, str], float]:
    """Median us of the nnrt session per (engine, level), level none vs basic, interleaved."""
    from nnrt_core import ScheduleConfig, Session
    runs = {}
    for e in engines:
        for lvl in ("none", "basic"):
            s = Session(str(path), ScheduleConfig(backends=[e], num_threads=1, optimization_level=lvl,
                                                  input_shapes=shapes or None))
            names = [i.name for i in s.inputs]
            mine = {k: v for k, v in feeds.items() if k in names}
            runs[(e, lvl)] = (lambda s=s, mine=mine: s.run(mine))
    times: dict[tuple[str, str], list[float]] = {k: [] for k in runs}
    items = list(runs.items())
    for r in range(rounds):
        for k, fn in (items if r % 2 else items[::-1]):
            times[k].append(median_us(fn, 30, 3))
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--models", default="mww,oww", help="comma-separated substrings of model keys")
    ap.add_argument("--engines", default="onnxruntime,openvino")
    args = ap.parse_args(argv)
    root = tm.models_dir(args.models_dir)
    wanted = [w for w in args.models.split(",") if w]
    specs = [s for s in tm.SPECS if any(w in s.key for w in wanted) and tm.shipped_path(root, s).is_file()]
    if not specs:
        print(f"no models under {root}: run benchmarks/tflite_models.py --download first")
        return 1
    from nnrt_core.ir import Model
    engines = [e for e in args.engines.split(",") if e]
    load0 = os.getloadavg()[0]
    fixed, per_node = ort_dispatch_cost()
    print(f"ONNX Runtime, one thread: {fixed:.1f} us per run of a one-node graph, {per_node:.2f} us per extra node")
    print(f"{'model':<26}{'ops':>5}{'import':>7}{'nnrt':>6}{'ort':>5}{'run us':>8}{'fixed':>7}{'nodes':>7}"
          f"{'kernels':>8}  " + "  ".join(f"{e} none->basic us" for e in engines))
    for spec in specs:
        path = tm.model_path(root, spec)
        feeds, shapes = tl.model_feeds(spec, path)
        ops = sum(tm.list_ops(path)["ops"].values())
        imported, sess = graph_sizes(path, shapes)
        b = ort_breakdown(Model(sess.graph), feeds, fixed, per_node)
        ab = level_ab(path, shapes, feeds, engines)
        cells = "  ".join(f"{ab[(e, 'none')]:8.1f} ->{ab[(e, 'basic')]:7.1f} ({ab[(e, 'basic')] / ab[(e, 'none')]:.2f}x)"
                          for e in engines)
        print(f"{spec.key:<26}{ops:>5}{imported:>7}{len(sess.graph.nodes):>6}{b['ort_nodes']:>5}{b['run']:>8.1f}"
              f"{b['fixed']:>7.1f}{b['nodes_cost']:>7.1f}{b['kernels']:>8.1f}  {cells}", flush=True)
    print(f"load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after; {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
