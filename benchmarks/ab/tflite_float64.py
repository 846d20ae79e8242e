"""Who is closest to the exact result?  For models of ``tflite_models.py``:
each fp32 implementation (LiteRT's XNNPACK and reference kernels, nnrt's
``numpy`` and ``ort`` configs) against nnrt's import run in **float64** on the
NumPy backend, per output (max |err| / max |float64|).  Plus the fp16 floor:
how far LiteRT's own output moves when only the input is rounded to fp16.

    python benchmarks/ab/tflite_float64.py --models mp_selfie_seg,mp_pose_landmark_full

The float64 graph is nnrt's own import, so a mapping error would be shared
with nnrt's rows; LiteRT's distances to it are the check of the mapping.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the shared benchmark modules
import tflite_models as tm  # noqa: E402


def float64_outputs(path: Path, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """The imported graph with every float32 value and constant widened to float64, on NumPy."""
    from nnrt_core import ScheduleConfig, Session
    from nnrt_core.frontends.tflite import load_tflite
    from nnrt_core.ir import DataType, TensorType

    model = load_tflite(str(path))
    seen: set[int] = set()

    def widen(v) -> None:
        if v is None or id(v) in seen:
            return
        seen.add(id(v))
        if v.const is not None and v.const.dtype == np.float32:
            v.const = v.const.astype(np.float64)
        if isinstance(v.type, TensorType) and v.type.dtype == DataType.FLOAT:
            v.type = TensorType(DataType.DOUBLE, v.type.shape)

    g = model.graph
    for v in [*g.inputs, *g.initializers.values()]:
        widen(v)
    for n in g.nodes:
        for v in [*n.inputs, *n.outputs]:
            widen(v)
    sess = Session(model, ScheduleConfig(backends=["numpy"]))
    return list(sess.run({i.name: x.astype(np.float64) for i, x in zip(sess.inputs, feeds)}).values())


def fp32_runs(path: Path, spec: tm.Spec, feeds: list[np.ndarray]) -> dict[str, list[np.ndarray]]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from nnrt_core import ScheduleConfig, Session

    out = {"LiteRT XNNPACK": tm.LiteRT(path, spec.input_shapes).run(feeds)}
    try:
        it = Interpreter(model_path=str(path),
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        out["LiteRT reference kernels"] = [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    except Exception as e:  # MediaPipe's custom ops: only XNNPACK has them
        print(f"  (LiteRT reference kernels cannot run it: {str(e).splitlines()[0][:80]})")
    for cfg in ("numpy", "ort"):
        sess = Session(path, ScheduleConfig(**tm.CONFIGS[cfg]))
        out["nnrt " + cfg] = list(sess.run({i.name: x for i, x in zip(sess.inputs, feeds)}).values())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mp_selfie_seg,mp_pose_landmark_full", help="comma-separated model keys")
    a = ap.parse_args()
    root = tm.models_dir(None)
    for key in a.models.split(","):
        spec = next(s for s in tm.SPECS if s.key == key)
        path = tm.model_path(root, spec)
        feeds = spec.feeds(tm.LiteRT(path, spec.input_shapes).inputs)[0]
        exact = float64_outputs(path, feeds)
        print(f"{key}: max |err| / max |float64| per output (load average {os.getloadavg()[0]:.1f})")
        runs = fp32_runs(path, spec, feeds)
        half = tm.LiteRT(path, spec.input_shapes).run([x.astype(np.float16).astype(np.float32) for x in feeds])
        for name, outs in runs.items():
            errs = [float(np.abs(o.astype(np.float64) - e).max() / np.abs(e).max()) for o, e in zip(outs, exact)]
            print(f"  {name:26s} " + "  ".join(f"{x:.2e}" for x in errs))
        base = runs["LiteRT XNNPACK"]
        moved = [float(np.abs(h.astype(np.float64) - b).max() / np.abs(b).max()) for h, b in zip(half, base)]
        l2 = [float(np.linalg.norm(h.astype(np.float64) - b) / np.linalg.norm(b)) for h, b in zip(half, base)]
        print("  fp16 floor: LiteRT XNNPACK with only its input rounded to fp16 moves by (max rel / rel L2): "
              + "  ".join(f"{m:.1e}/{r:.1e}" for m, r in zip(moved, l2)))


if __name__ == "__main__":
    main()
