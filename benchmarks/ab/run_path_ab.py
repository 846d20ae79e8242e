"""Where the per-call time of ``Session.run`` goes on a one-partition plan
(ONNX Runtime, OpenVINO), in one process, blocks interleaved (the order
rotates every round), process CPU time, medians.

    python benchmarks/ab/run_path_ab.py [--engines onnxruntime,openvino] [--calls 500] [--rounds 15]
                                        [--real silero_vad,... --models-dir DIR]

Per engine, on a silero-vad-like model (a free-shaped [1, 576] signal, a
[2, N, 128] state handed back, an int64 scalar rate) and a one-node Relu:

* ``raw``: the engine's own fastest Python call (ORT ``InferenceSession.run``;
  OpenVINO ``set_input_tensor(Tensor(x, shared_memory=True))``, ``infer()``,
  outputs copied, as the plugin does);
* ``partition.run``: the plugin's compiled partition called directly;
* ``Session.run``: the whole path (feed checks, plan, executor, output check, dict);
* ``core only``: ``Session.run`` with the partition's ``run`` (and its ``direct_run``) replaced by a
  function returning the outputs of a real run: nnrt's own per-call cost,
  without the engine (hot caches: a real run evicts them, so in context the
  same code costs more; compare ``Session.run - raw``).

``--real`` adds the ORT delegate with ORT's memory pattern off (the plugin's
default on the CPU provider) and on against raw ORT on those real models of
``benchmarks/real_models.py`` (1 intra-op thread each).  Print ``uptime``
with the results: the machine is shared.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]


def interleaved(fns: dict[str, Callable[[], object]], calls: int, rounds: int) -> dict[str, float]:
    """Median CPU microseconds per call of each function, in blocks of ``calls``."""
    labels = list(fns)
    times: dict[str, list[float]] = {k: [] for k in labels}
    for f in fns.values():
        for _ in range(20):
            f()
    gc.disable()
    try:
        for r in range(rounds):
            order = labels[r % len(labels):] + labels[:r % len(labels)]
            for k in order[::-1] if r % 2 else order:
                f, t0 = fns[k], time.process_time()
                for _ in range(calls):
                    f()
                times[k].append((time.process_time() - t0) / calls * 1e6)
    finally:
        gc.enable()
    return {k: statistics.median(v) for k, v in times.items()}


def show(title: str, res: dict[str, float], base: str) -> None:
    print(f"{title}  (load {os.getloadavg()[0]:.2f})")
    for k, v in res.items():
        print(f"  {k:26s} {v:9.2f} us   x{v / res[base]:.3f}  ({v - res[base]:+.2f} us)")


def stateful_model() -> bytes:
    rate = numpy_helper.from_array(np.array(16000, np.int64), "rate")
    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Identity", ["state"], ["state_out"]),
         helper.make_node("Equal", ["sr", "rate"], ["is_16k"])], "stateful",
        [vi("x", TensorProto.FLOAT, [None, None]), vi("state", TensorProto.FLOAT, [2, None, 128]),
         vi("sr", TensorProto.INT64, [])],
        [vi("y", TensorProto.FLOAT, [None, None]), vi("state_out", TensorProto.FLOAT, [2, None, 128]),
         vi("is_16k", TensorProto.BOOL, [])], [rate])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def one_node() -> bytes:
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one_node",
                          [vi("x", TensorProto.FLOAT, [1, 64])], [vi("y", TensorProto.FLOAT, [1, 64])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def feeds_of(name: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "one_node":
        return {"x": rng.standard_normal((1, 64)).astype(np.float32)}
    return {"x": rng.standard_normal((1, 576)).astype(np.float32),
            "state": rng.standard_normal((2, 1, 128)).astype(np.float32), "sr": np.array(16000, np.int64)}


def raw_runner(engine: str, data: bytes, feeds: dict[str, np.ndarray]) -> Callable[[], Any]:
    if engine == "onnxruntime":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, feeds)
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(data, b""), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})
    req = compiled.create_infer_request()
    names = [p.get_any_name() for p in compiled.inputs]
    xs = [feeds[n] for n in names]
    outs = range(len(compiled.outputs))

    def run() -> list[np.ndarray]:
        for i, x in enumerate(xs):
            req.set_input_tensor(i, ov.Tensor(x, shared_memory=True))
        req.infer()
        return [req.get_output_tensor(i).data.copy() for i in outs]
    return run


def one_partition(engine: str, model: str, calls: int, rounds: int) -> None:
    from nnrt_core import ScheduleConfig, Session

    data = stateful_model() if model == "stateful" else one_node()
    feeds = feeds_of(model)
    sess = Session(data, ScheduleConfig(backends=[engine], backup=None, num_threads=1))
    core = Session(data, ScheduleConfig(backends=[engine], backup=None, num_threads=1))
    part, stub_part = sess.executor.steps[0].compiled, core.executor.steps[0].compiled
    cached = stub_part.run(feeds)
    stub_part.run = lambda inputs, control=None: dict(cached)  # type: ignore[method-assign]
    ex = core.executor
    if ex.direct is not None:  # the direct path calls the partition's direct_run, made at build: stub it too
        from nnrt_core.runtime.direct import direct_call
        from nnrt_core.runtime.feeds import feed_specs

        ex.direct = direct_call(feed_specs(core.graph.inputs), lambda inputs: dict(cached), *ex.steps[0].direct_checks())
    res = interleaved({"raw": raw_runner(engine, data, feeds), "partition.run": lambda: part.run(feeds),
                       "Session.run": lambda: sess.run(feeds), "core only": lambda: core.run(feeds)}, calls, rounds)
    show(f"{engine} {model}", res, "raw")


def mem_pattern(keys: list[str], root: str | None, calls: int, rounds: int) -> None:
    import onnxruntime as ort

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import real_models
    from nnrt_core import ScheduleConfig, Session

    for key in keys:
        found = real_models.model_feeds(key, real_models.models_dir(root))
        if found is None:
            print(f"{key}: not found (python benchmarks/real_models.py --download)")
            continue
        path, feeds = found
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.log_severity_level = 1, 3
        raw = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        sessions = {f"nnrt, pattern {'on' if on else 'off'}": Session(path, ScheduleConfig(
            backends=["onnxruntime"], backup=None, num_threads=1,
            backend_options={"onnxruntime": {"enable_mem_pattern": on}})) for on in (False, True)}
        fns: dict[str, Callable[[], object]] = {"raw ORT": lambda: raw.run(None, feeds)}
        fns.update({k: (lambda s=s: s.run(feeds)) for k, s in sessions.items()})
        show(f"{key}: ORT memory pattern", interleaved(fns, calls, rounds), "raw ORT")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="onnxruntime,openvino")
    ap.add_argument("--calls", type=int, default=500, help="calls per block")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--real", default="", help="real model keys for the memory-pattern A/B")
    ap.add_argument("--models-dir", default=None)
    args = ap.parse_args()
    for engine in args.engines.split(","):
        for model in ("stateful", "one_node"):
            one_partition(engine, model, args.calls, args.rounds)
    if args.real:
        mem_pattern(args.real.split(","), args.models_dir, max(1, args.calls // 4), args.rounds)


if __name__ == "__main__":
    main()
