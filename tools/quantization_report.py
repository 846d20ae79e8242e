"""Accuracy and NPU cost of int8 post-training quantization on a real model.

Trains the digits CNN of the test suite (``tests/digits_cnn.py``: scikit-learn's
bundled 8x8 digits, fixed seed), quantizes it with every calibration method
and prints the held-out accuracy of the float and int8 models on the NumPy
backend, ONNX Runtime and the emulated NPU (float model on the fp16 chip,
int8 model on the int8 chip), plus the NPU cost model's cycles::

    python tools/quantization_report.py [--calibration-samples 200]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from digits_cnn import accuracy, load_digits_split, to_onnx_model, train_digits_cnn  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.quantization import quantize  # noqa: E402


def _acc_session(model, x, y, cfg) -> tuple[float, Session]:
    sess = Session(model, cfg)
    pred = [sess.run({"image": x[i:i + 1]})["logits"][0].argmax() for i in range(len(x))]
    return accuracy(np.array(pred), y), sess


def _acc_ort(model, x, y) -> float:
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return accuracy(np.array([s.run(None, {"image": x[i:i + 1]})[0][0].argmax() for i in range(len(x))]), y)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration-samples", type=int, default=200)
    args = ap.parse_args()
    import logging

    logging.getLogger("nnrt").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    data = load_digits_split()
    float_model = to_onnx_model(train_digits_cnn(data))
    print(f"trained the digits CNN in {time.perf_counter() - t0:.1f}s "
          f"({len(data.x_train)} train / {len(data.x_test)} held-out images)")
    x, y = data.x_test, data.y_test
    npu = {"backends": ["npu_emu"], "backup": "numpy"}
    acc_f, _ = _acc_session(float_model, x, y, ScheduleConfig(backends=["numpy"]))
    acc_f_npu, fs = _acc_session(float_model, x, y, ScheduleConfig(**npu, precision="fp16",
                                                                    devices={"npu_emu": "emu-npu-f16"}))
    fd = fs.partitions[0].details
    print(f"\n{'model':<40}{'numpy':>8}{'onnxrt':>8}{'npu':>8}{'npu cycles':>12}{'npu us':>8}")
    print(f"{'float (npu: fp16 chip)':<40}{acc_f:>8.2%}{_acc_ort(float_model, x, y):>8.2%}{acc_f_npu:>8.2%}"
          f"{fd['est_cycles']:>12}{fd['est_time_ms'] * 1e3:>8.2f}")
    calib = {"image": data.x_train[:args.calibration_samples]}
    for label, opts in (("int8 minmax", {}), ("int8 percentile 99.99", {"method": "percentile"}),
                        ("int8 entropy", {"method": "entropy"}),
                        ("int8 entropy symmetric", {"method": "entropy", "symmetric": True})):
        res = quantize(float_model, calib, progress=False, **opts)
        a_np, _ = _acc_session(res.proto, x, y, ScheduleConfig(backends=["numpy"]))
        a_npu, qs = _acc_session(res.proto, x, y, ScheduleConfig(**npu, precision="int8",
                                                                 devices={"npu_emu": "emu-npu-i8"}))
        qd = qs.partitions[0].details
        print(f"{label + ' (npu: int8 chip)':<40}{a_np:>8.2%}{_acc_ort(res.proto, x, y):>8.2%}{a_npu:>8.2%}"
              f"{qd['est_cycles']:>12}{qd['est_time_ms'] * 1e3:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
