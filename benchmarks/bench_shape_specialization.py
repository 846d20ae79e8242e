"""Shape specialization: does the NPU take part without ``input_shapes``, and
what does a run with a seen signature cost?

    python benchmarks/bench_shape_specialization.py [--models-dir DIR] [--rounds N]

1. **NPU share.**  For every ``light`` model of the onnx wheel and every real
   model of ``benchmarks/real_models.py`` found under ``--models-dir`` (run
   ``real_models.py --download`` first), the share of nodes placed on
   ``npu_emu`` under ``backends=["npu_emu", "onnxruntime"], backup="numpy"``:
   a) with no ``input_shapes``, after one run (the session plans for the
   run's shapes); b) with ``input_shapes`` fixed to the same feeds.  Target:
   a == b on every model.
2. **Seen-signature overhead.**  Per-call time of a session that specialized
   on its first run against a session built for that shape, interleaved
   (medians), on a one-node dynamic Add (``specialize_shapes="always"``, the
   NumPy backend: nothing but the lookup differs) and on a small dynamic CNN
   on the NPU; ONNX Runtime's time for the same model is printed for scale.
   Target: <= 5 us more per call.
"""
from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_models  # noqa: E402  (the real models' specs and feeds)

from nnrt_core import ScheduleConfig, Session  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
# on_overflow="warn": NPU share and speed as planned (the light models' placeholder weights exceed fp16)
NPU = dict(precision="fp16", backends=["npu_emu", "onnxruntime"], backup="numpy", on_overflow="warn")
ort.set_default_logger_severity(3)


def npu_share(sess: Session) -> float:
    placed = list(sess.placement.values())
    return placed.count("npu_emu") / max(1, len(placed))


def share_row(name: str, path: Path, feeds: dict[str, np.ndarray]) -> tuple[str, float, float, int, float]:
    auto = Session(path, ScheduleConfig(**NPU))
    dynamic = npu_share(auto)  # before any run: the one dynamic plan
    auto.run(feeds)
    row = name, npu_share(auto), len(auto.specializations or ()), dynamic
    del auto
    gc.collect()  # the emulated device's memory is freed with the sessions that hold it
    given = Session(path, ScheduleConfig(**NPU, input_shapes={k: v.shape for k, v in feeds.items()}))
    share = npu_share(given)
    del given
    gc.collect()
    return row[0], row[1], share, row[2], row[3]


def model_feeds() -> list[tuple[str, Path, dict[str, np.ndarray]]]:
    rows = []
    rng = np.random.default_rng(0)
    for path in sorted(LIGHT.glob("light_*.onnx")):
        ref = Session(path, ScheduleConfig(backends=["numpy"]))
        feeds = {i.name: rng.random(tuple(d if isinstance(d, int) else 1 for d in i.shape), dtype=np.float32)
                 for i in ref.inputs}
        rows.append((path.stem.replace("light_", ""), path, feeds))
    return rows


def interleave(a: Callable[[], object], b: Callable[[], object], c: Callable[[], object], rounds: int,
               inner: int) -> tuple[float, float, float]:
    times: list[list[float]] = [[], [], []]
    fns = [a, b, c]
    for r in range(rounds):
        order = range(3) if r % 2 == 0 else reversed(range(3))
        for i in order:
            t0 = time.perf_counter()
            for _ in range(inner):
                fns[i]()
            times[i].append((time.perf_counter() - t0) / inner)
    return tuple(statistics.median(t) for t in times)  # type: ignore[return-value]


def add_model() -> onnx.ModelProto:
    g = h.make_graph([h.make_node("Add", ["a", "b"], ["c"], name="add")], "add",
                     [h.make_tensor_value_info("a", T.FLOAT, ["N", 16]), h.make_tensor_value_info("b", T.FLOAT, ["N", 16])],
                     [h.make_tensor_value_info("c", T.FLOAT, ["N", 16])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def cnn_model() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    w = h.make_tensor("w", T.FLOAT, [8, 3, 3, 3], rng.standard_normal(216).astype(np.float32).tolist())
    g = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                      h.make_node("Relu", ["c"], ["y"], name="relu")], "cnn",
                     [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, "H", "W"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 8, "H", "W"])], [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def overhead_rows(rounds: int) -> list[tuple[str, float, float, float]]:
    rows = []
    cases = [("add 1x16, numpy (always)", add_model(), dict(backends=["numpy"], specialize_shapes="always"),
              {"a": np.ones((1, 16), np.float32), "b": np.ones((1, 16), np.float32)}, 300),
             ("conv 1x3x8x8, npu_emu", cnn_model(), NPU,
              {"x": np.random.default_rng(2).random((1, 3, 8, 8), dtype=np.float32)}, 50)]
    for label, model, cfg, feeds, inner in cases:
        data = model.SerializeToString()
        spec = Session(data, ScheduleConfig(**cfg))
        spec.run(feeds)
        built = Session(data, ScheduleConfig(**cfg, input_shapes={k: v.shape for k, v in feeds.items()}))
        assert spec.placement == built.placement, (spec.placement, built.placement)
        raw = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        gc.disable()
        a, b, c = interleave(lambda: spec.run(feeds), lambda: built.run(feeds), lambda: raw.run(None, feeds),
                             rounds, inner)
        gc.enable()
        rows.append((label, a * 1e6, b * 1e6, c * 1e6))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--rounds", type=int, default=31, help="interleaved rounds for the overhead medians")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    root = real_models.models_dir(args.models_dir)
    rows = [share_row(*r) for r in model_feeds() + real_models.first_step_feeds(root)]
    print(f"{'model':26s} {'dynamic plan':>13s} {'after one run':>14s} {'with input_shapes':>18s} {'plans':>6s}  ok"
          "   (share of nodes on npu_emu)")
    ok = True
    for name, auto, given, plans, dynamic in rows:
        good = abs(auto - given) < 1e-9
        ok &= good
        print(f"{name:26s} {dynamic:13.1%} {auto:14.1%} {given:18.1%} {plans:6d}  {'yes' if good else 'NO'}")
    print(f"models with equal NPU share after one run and with input_shapes: "
          f"{sum(abs(r[1] - r[2]) < 1e-9 for r in rows)}/{len(rows)}; the NPU takes part in "
          f"{sum(r[1] > 0 for r in rows)} after one run, {sum(r[4] > 0 for r in rows)} with the dynamic plan alone "
          f"('plans': specializations built, 0 = static inputs)")
    print(f"\n{'seen-signature run':28s} {'specialized':>12s} {'built for shape':>16s} {'overhead':>9s} {'ORT':>9s}")
    for label, a, b, c in overhead_rows(args.rounds):
        print(f"{label:28s} {a:10.2f}us {b:14.2f}us {a - b:7.2f}us {c:7.2f}us")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
