"""Int8 QDQ models on the emulated NPU: partitions, int8 coverage, accuracy and emulator speed.

    python benchmarks/bench_npu_int8.py [--runs N] [--models squeezenet,resnet50,digits] [--json]

Every model is quantized with ``nnrt_core.quantization.quantize`` (per-channel
int8 weights, asymmetric int8 activations, min/max calibration):

* ``squeezenet`` / ``resnet50``: the onnx ``light`` models with their shipped
  untrained weights (constant tensors; logits around 1e10) and, as ``*-he``,
  with random He-scaled weights (informative logits); calibrated on 8
  uniform [0, 1) images;
* ``digits``: the small CNN of the test suite trained on scikit-learn's digits
  (``tests/digits_cnn.py``), calibrated on 200 training images.

The logits (the Softmax input where the model ends in one) are exposed as a
graph output of the QDQ file, so ONNX Runtime, the NumPy backend and the NPU
(``precision="int8"``, no chip named) run the same file.  Printed per model:
NPU partitions, int8 instructions per Conv, logit cosine similarity and top-1
agreement against ONNX Runtime, the simulated device time of the cost model,
and the host wall time of the emulator against the NumPy backend running the
same QDQ model (medians, interleaved runs), and the 1-minute load average
before and after (``--json``: ``{"rows": [...], "load_average": [...]}``).  Any
onnx ``light`` model name works (``shufflenet``, ``inception_v1-he``...).  Targets: <= 3 partitions, every
Conv an int8 instruction, cosine >= 0.99, wall ratio <= 1.5.

The emulator's GEMMs use numpy's BLAS as configured (OpenBLAS: one thread per
core, statically split), while the NumPy backend sets OpenBLAS to one thread
and splits large products over its own threads; on a busy machine OpenBLAS's
threads wait for each other.  ``OPENBLAS_NUM_THREADS=1 python
benchmarks/bench_npu_int8.py`` compares the compute alone (both sides on one
thread).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from nnrt_core import ScheduleConfig, Session
from nnrt_core.quantization import quantize

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # test-support modules: the digits CNN
sys.path.insert(0, str(ROOT / "examples"))  # He weights for light models
from light_weights import he_initialized  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["squeezenet", "squeezenet-he", "resnet50", "resnet50-he", "digits"]


def float_model(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
    """(float model, calibration arrays, test feeds)."""
    if name == "digits":
        from digits_cnn import load_digits_split, to_onnx_model, train_digits_cnn

        data = load_digits_split()
        model = to_onnx_model(train_digits_cnn(data))
        return model, {"image": data.x_train[:200]}, [{"image": data.x_test[i:i + 1]} for i in range(8)]
    base = name.split("-")[0]
    model = onnx.load(str(LIGHT / f"light_{base}.onnx"))
    if name.endswith("-he"):
        model = he_initialized(model)
    inits = {t.name for t in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in inits)
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)
    calib = {inp.name: rng.random([8] + shape[1:], dtype=np.float32)}
    tests = [{inp.name: rng.random(shape, dtype=np.float32)} for _ in range(3)]
    return model, calib, tests


def qdq_with_logits(model: onnx.ModelProto, calib: dict[str, np.ndarray]) -> tuple[bytes, str]:
    """The quantized model with its logits (the Softmax input, else output 0) as an output."""
    q = quantize(model, calib, progress=False).proto
    softmax = [n for n in q.graph.node if n.op_type == "Softmax"]
    if not softmax:
        return q.SerializeToString(), q.graph.output[0].name
    logits = softmax[-1].input[0]
    out0 = q.graph.output[0].type.tensor_type.shape.dim
    q.graph.output.append(helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT,
                                                        [d.dim_value for d in out0][:2]))
    return q.SerializeToString(), logits


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / den) if den else float(np.array_equal(a, b))


def bench(name: str, runs: int) -> dict:
    model, calib, tests = float_model(name)
    qdq, logits = qdq_with_logits(model, calib)
    npu = Session(qdq, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="int8"))
    host = Session(qdq, ScheduleConfig(backends=["numpy"]))
    ref = ort.InferenceSession(qdq, providers=["CPUExecutionProvider"])
    convs = sum(1 for n in onnx.load_from_string(qdq).graph.node if n.op_type == "Conv")
    npu_parts = [p for p in npu.partitions if p.backend == "npu_emu"]
    kernels = [op["kernel"] for p in npu_parts for op in p.details["per_op"]]
    cos, top1 = [], []
    for feeds in tests:
        want = ref.run([logits], feeds)[0]
        got = npu.run(feeds, output_names=[logits])[logits]
        cos.append(cosine(got, want))
        top1.append(int(np.argmax(got)) == int(np.argmax(want)))
    t_npu, t_np = [], []
    feeds = tests[0]
    for _ in range(runs):
        for sess, acc in ((npu, t_npu), (host, t_np)):
            t0 = time.perf_counter()
            sess.run(feeds)
            acc.append(time.perf_counter() - t0)
    med_npu, med_np = statistics.median(t_npu), statistics.median(t_np)
    return {"model": name, "partitions": len(npu.partitions), "npu_partitions": len(npu_parts),
            "convs": convs, "int8_convs": kernels.count("qconv"),
            "int8_instructions": sum(1 for k in kernels if k.startswith("q")),
            "cosine_min": min(cos), "top1_agree": f"{sum(top1)}/{len(top1)}",
            "simulated_device_ms": sum(p.details["est_time_ms"] for p in npu_parts),
            "npu_wall_ms": med_npu * 1e3, "numpy_wall_ms": med_np * 1e3, "wall_ratio": med_npu / med_np}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("nnrt").setLevel(logging.ERROR)
    load_before = _load()
    rows = [bench(m.strip(), args.runs) for m in args.models.split(",") if m.strip()]
    load = [load_before, _load()]
    if args.json:
        print(json.dumps({"rows": rows, "load_average": load}, indent=2))
        return 0
    print(f"load average (1 min) before {load[0]:.2f}, after {load[1]:.2f} on {os.cpu_count()} cores")
    print(f"{'model':<15}{'parts':>6}{'int8 conv':>11}{'q-instr':>8}{'cos min':>9}{'top1':>6}"
          f"{'sim dev ms':>11}{'npu ms':>9}{'numpy ms':>9}{'ratio':>7}")
    for r in rows:
        print(f"{r['model']:<15}{r['partitions']:>6}{r['int8_convs']:>6}/{r['convs']:<4}{r['int8_instructions']:>8}"
              f"{r['cosine_min']:>9.5f}{r['top1_agree']:>6}{r['simulated_device_ms']:>11.3f}"
              f"{r['npu_wall_ms']:>9.1f}{r['numpy_wall_ms']:>9.1f}{r['wall_ratio']:>7.2f}")
    print("sim dev ms: the cost model's simulated device time; npu/numpy ms: host wall time (median of "
          f"{args.runs} interleaved runs); ratio = npu / numpy (goal <= 1.5)")
    ok = all(r["partitions"] <= 3 and r["int8_convs"] == r["convs"] and r["cosine_min"] >= 0.99
             for r in rows)
    print("targets (<= 3 partitions, every Conv int8, cosine >= 0.99):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
