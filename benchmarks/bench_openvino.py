"""nnrt's OpenVINO backend against raw OpenVINO on the same file and hints (issue #33).

    python benchmarks/bench_openvino.py [--models squeezenet,resnet50,...] [--rounds 7]
                                        [--seconds 0.25] [--no-ort] [--json]

For each model (the onnx wheel's ``light`` models with He-initialized
weights, written once to a temporary ``.onnx`` file that every engine reads,
and ``one_node``: a single Relu on a [1, 64] tensor, where the per-call cost
is all there is) three engines run, each in its own process so their thread
pools never compete:

* ``raw_ov``: ``Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
  "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0})`` (the config nnrt gives at fp32),
  its fastest Python call: ``set_input_tensor(Tensor(x, shared_memory=True))``,
  ``infer()`` and the output copied, as nnrt's are (``infer([x])`` costs ~40 us
  more per call in OpenVINO's argument dispatch);
* ``nnrt_ov``: ``Session(path, ScheduleConfig(backends=["openvino"], backup=None))``
  (the same hint: nnrt's fp32 default) and ``Session.run``;
* ``raw_ort`` (reference, ``--no-ort`` drops it): ``InferenceSession(path)``.

Blocks are interleaved: every round, each engine times one block of runs
(``--seconds`` long) after a warm-up; the figure per engine is the median
per-run latency over all its blocks.  Ratios are nnrt_ov / raw_ov (target
<= 1.03 geomean over ResNet50 and the light models, <= 1.3 on ``one_node``)
and raw_ov / raw_ort.  Print ``uptime`` with the results: the machine is shared.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LIGHT_MODELS = ["squeezenet", "resnet50", "shufflenet", "inception_v1", "inception_v2", "densenet121",
                "bvlc_alexnet", "zfnet512", "vgg19"]
ENGINES = ("raw_ov", "nnrt_ov", "raw_ort")


def write_model(name: str, folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """The model file every engine reads, and its input."""
    import onnx
    from onnx import TensorProto, helper

    path = folder / f"{name}.onnx"
    if name == "one_node":
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one_node",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        shape, input_name = [1, 64], "x"
    else:
        sys.path.insert(0, str(ROOT / "examples"))
        from light_weights import he_initialized

        m = he_initialized(onnx.load(str(Path(onnx.__file__).parent / "backend/test/data/light" / f"light_{name}.onnx")))
        inits = {i.name for i in m.graph.initializer}
        inp = [i for i in m.graph.input if i.name not in inits][0]
        shape, input_name = [d.dim_value for d in inp.type.tensor_type.shape.dim], inp.name
    onnx.save(m, str(path))
    return path, {input_name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}


def _runner(engine: str, path: str, feeds: dict[str, np.ndarray]):
    """A no-argument callable doing one run, and its outputs."""
    if engine == "raw_ov":
        import openvino as ov

        req = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                    "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}).create_infer_request()
        xs = list(feeds.values())

        def run_raw():  # OpenVINO's fastest Python path: shared tensors set, infer(), outputs copied
            for i, x in enumerate(xs):
                req.set_input_tensor(i, ov.Tensor(x, shared_memory=True))
            req.infer()
            return [req.get_output_tensor(0).data.copy()]

        return run_raw
    if engine == "nnrt_ov":
        from nnrt_core import ScheduleConfig, Session

        sess = Session(path, ScheduleConfig(backends=["openvino"], backup=None))
        assert [p.backend for p in sess.partitions] == ["openvino"], sess.partitions
        return lambda: sess.run(feeds)
    import onnxruntime as ort

    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return lambda: s.run(None, feeds)


def worker(engine: str, path: str, feeds: dict[str, np.ndarray], conn) -> None:
    """Answers ``("block", seconds)`` with the per-run latencies of one block."""
    run = _runner(engine, path, feeds)
    first = run()
    out = first[0] if isinstance(first, list) else list(first.values())[0]
    conn.send(("ready", np.asarray(out)))
    for _ in range(3):
        run()
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        times, end = [], time.perf_counter() + msg[1]
        while True:
            t0 = time.perf_counter()
            run()
            t1 = time.perf_counter()
            times.append(t1 - t0)
            if t1 >= end and len(times) >= 3:
                break
        conn.send(("times", times))


def bench_model(name: str, engines: list[str], rounds: int, seconds: float, folder: Path) -> dict:
    path, feeds = write_model(name, folder)
    ctx = mp.get_context("spawn")
    procs, conns, outs = {}, {}, {}
    try:
        for e in engines:  # one at a time: builds do not overlap
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker, args=(e, str(path), feeds, child), daemon=True)
            p.start()
            procs[e], conns[e] = p, parent
            kind, outs[e] = parent.recv()
        times: dict[str, list[float]] = {e: [] for e in engines}
        for r in range(rounds):
            order = engines if r % 2 == 0 else engines[::-1]
            for e in order:
                conns[e].send(("block", seconds))
                times[e] += conns[e].recv()[1]
    finally:
        for e, c in conns.items():
            try:
                c.send(("stop",))
            except OSError:
                pass
        for p in procs.values():
            p.join(10)
    med = {e: statistics.median(t) * 1e3 for e, t in times.items()}
    ref = outs["raw_ov"]
    err = float(np.abs(outs["nnrt_ov"] - ref).max() / max(float(np.abs(ref).max()), 1e-30))
    row = {"model": name, **{f"{e}_ms": round(med[e], 4) for e in engines},
           "nnrt_vs_raw_ov": med["nnrt_ov"] / med["raw_ov"], "err_vs_raw_ov": err,
           "runs": {e: len(t) for e, t in times.items()}}
    if "raw_ort" in med:
        row["raw_ov_vs_ort"] = med["raw_ov"] / med["raw_ort"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(["one_node"] + LIGHT_MODELS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=0.25, help="length of one timed block")
    ap.add_argument("--no-ort", action="store_true", help="skip the raw ONNX Runtime reference")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    engines = [e for e in ENGINES if not (args.no_ort and e == "raw_ort")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="nnrt-bench-ov-") as tmp:
        for name in args.models.split(","):
            rows.append(bench_model(name.strip(), engines, args.rounds, args.seconds, Path(tmp)))
            if not args.json:
                r = rows[-1]
                ort_part = f"  raw ov / ort {r['raw_ov_vs_ort']:.3f}" if "raw_ov_vs_ort" in r else ""
                print(f"{r['model']:<14} raw ov {r['raw_ov_ms']:9.3f} ms  nnrt ov {r['nnrt_ov_ms']:9.3f} ms  "
                      f"nnrt/raw {r['nnrt_vs_raw_ov']:.3f}  err {r['err_vs_raw_ov']:.1e}{ort_part}", flush=True)
    models = [r for r in rows if r["model"] != "one_node"]
    summary = {"geomean_nnrt_vs_raw_ov": math.exp(statistics.fmean(math.log(r["nnrt_vs_raw_ov"]) for r in models))
               if models else None,
               "one_node_nnrt_vs_raw_ov": next((r["nnrt_vs_raw_ov"] for r in rows if r["model"] == "one_node"), None),
               "load_average": os.getloadavg()}
    if "raw_ort" in engines and models:
        summary["geomean_raw_ov_vs_ort"] = math.exp(statistics.fmean(math.log(r["raw_ov_vs_ort"]) for r in models))
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=2))
    else:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
