"""nnrt on real models: the real engines first, measured on this machine,
then the heterogeneous plan with the emulated NPU.

    python examples/heterogeneous_demo.py [--scheduler cost|priority] [MODEL ...]   (default: a few light models)

Part 1, real engines (wall time measured here, medians of interleaved blocks):
raw ONNX Runtime (an ``InferenceSession`` with default options), each real
engine installed as an nnrt backend alone (``onnxruntime``; ``openvino`` when
its plugin is installed), and ``Session(model)`` with no config at all, which
picks its plan itself (``backends="auto"``: the real engines, chosen by
measurement when there are two or more; ``nnrt_core/compiler/measure.py``).
Each row gives the latency, the ratio to raw ONNX Runtime, the largest
difference from raw ONNX Runtime relative to max|ref|, and what ran.

Part 2, the emulated NPU: for each model it prints where every partition runs (placed by the ``cost``
scheduler unless told otherwise), the largest difference from the reference
backend's outputs and, per partition, the host wall time on this machine and,
for the emulated NPU, its **simulated device time**, with the projected
end-to-end latency (host partitions measured + device partitions simulated +
modelled host<->device copies; see ``nnrt_core.profiling.projection``).  The
emulator runs the NPU program on the host, so the heterogeneous session's
wall time here is not the device's latency: the projection is what compares
with the NumPy-only wall time.

The ``light`` models ship with placeholder weights: every weight tensor is a
``ConstantOfShape`` fill, so every logit is equal and activations grow far
beyond what trained weights give (past fp16's range: the NPU would report
fp16 overflow and move its partitions to the backup).  The demo gives them
He-initialized random weights (:mod:`light_weights`, as the tests do), so the
outputs differ per class and the comparison with the reference means
something; a model passed by path is run as it is.
"""
from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

from light_weights import he_initialized
from nnrt_core import ScheduleConfig, Session, default_registry
from nnrt_core.profiling.projection import measure_projection

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
DEFAULT_MODELS = ["squeezenet", "resnet50", "inception_v1", "zfnet512"]
#: the real engines part 1 compares (their nnrt backends), when installed
REAL_ENGINES = ("onnxruntime", "openvino")


def real_engines(path: Path, model, feeds: dict, engines: list[str], rounds: int = 5) -> None:
    """Part 1: raw ORT, each engine alone through nnrt, and nnrt's own choice."""
    import onnxruntime as ort

    raw = ort.InferenceSession(model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model))
    sides = {"raw onnxruntime": lambda: dict(zip([o.name for o in raw.get_outputs()], raw.run(None, feeds)))}
    sessions = {f"nnrt {e}": Session(model, ScheduleConfig(backends=[e], backup="numpy")) for e in engines}
    sessions["nnrt Session(model)"] = chosen = Session(model)  # no config: nnrt picks
    for label, sess in sessions.items():
        sides[label] = (lambda s: lambda: s.run(feeds))(sess)
    ref = sides["raw onnxruntime"]()
    times: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(rounds):  # blocks of 3 runs, the order alternating: no side always follows another
        for label in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            sides[label]()  # the block's first run absorbs the previous side's spinning threads
            for _ in range(3):
                t = time.perf_counter()
                sides[label]()
                times[label].append(time.perf_counter() - t)
    base = statistics.median(times["raw onnxruntime"])
    print(f"\n=== {path.name}: real engines on this machine (wall time, median of {3 * rounds} runs)")
    print(f"  {'':<22}{'ms':>8}{'x raw ORT':>11}{'rel err':>10}  what ran")
    for label, fn in sides.items():
        med = statistics.median(times[label])
        out = fn()
        err = max(float(np.max(np.abs(out[k].astype(np.float64) - ref[k])) / max(float(np.max(np.abs(ref[k]))), 1e-30))
                  for k in ref)
        sess = sessions.get(label)
        what = "ONNX Runtime, default options" if sess is None else \
            ", ".join(f"{b} {n} nodes" for b, n in Counter(sess.placement.values()).most_common())
        print(f"  {label:<22}{med * 1e3:>8.2f}{med / base:>11.2f}{err:>10.1e}  {what}")
    measured = [e for e in chosen.events if e.kind == "plan_measured"]
    print("  nnrt's choice: " + (measured[0].message if measured else
                                 f"one real engine installed ({', '.join(engines)}): no plans to measure"))


def demo(path: Path, accelerators: list[str], scheduler: str, engines: list[str]) -> None:
    model = he_initialized(onnx.load(path)) if path.parent == LIGHT else path
    reference = Session(model, ScheduleConfig(backends=["numpy"]))
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.random(tuple(d if isinstance(d, int) else 1 for d in i.shape), dtype=np.float32)
             for i in reference.inputs}
    if engines:
        real_engines(path, model, feeds, engines)
    # the emulated chip computes in fp16: it is asked knowingly (under the default fp32 it declines its float nodes)
    precision = "fp16" if "npu_emu" in accelerators else "fp32"
    print(f"\n=== {path.name}: heterogeneous plan, backends={accelerators}, precision={precision!r} (the NPU is "
          "EMULATED: its times below are simulated device time)")
    hetero = Session(model, ScheduleConfig(backends=accelerators, backup="numpy", scheduler=scheduler,
                                           precision=precision))
    print(f"{'#':>3}  {'backend':<12}{'nodes':>6}  main op types")
    for p in hetero.partitions:
        ops = Counter(r.op_type for r in hetero.placement_report if r.partition == p.index)
        top = ", ".join(f"{k}x{v}" for k, v in ops.most_common(4))
        print(f"{p.index:>3}  {p.backend:<12}{len(p.nodes):>6}  {top}")
    for e in hetero.events:
        print(f"  ! {e.kind}: {e.message.splitlines()[0][:150]}")
    ref_out = reference.run(feeds)
    out = hetero.run(feeds)
    diff = max(float(np.max(np.abs(out[k].astype(np.float64) - ref_out[k]))) for k in ref_out)
    counts = Counter(hetero.placement.values())
    print("placement: " + ", ".join(f"{b} {n} nodes" for b, n in counts.most_common()))
    print(f"max |diff| vs reference {diff:.2e}")
    projected = measure_projection(hetero.compiled_model, hetero.run_observed, feeds, runs=3)
    numpy_only = measure_projection(reference.compiled_model, reference.run_observed, feeds, runs=3)
    print(projected.format())
    kind = "projected, simulated device time for the NPU" if projected.emulated else "measured"
    print(f"latency: heterogeneous {projected.projected_ms:.2f} ms ({kind}; host wall here "
          f"{projected.wall_ms:.1f} ms), numpy-only {numpy_only.projected_ms:.2f} ms (measured)")


def main(argv: list[str]) -> int:
    reg = default_registry()
    print("backends:")
    for r in sorted(reg.backends.values(), key=lambda r: -r.priority):
        print(f"  {r.name:<12} priority {r.priority:>4}  {'available' if r.available else 'unavailable: ' + str(r.reason)}")
    accelerators = [r.name for r in reg.available_backends() if r.name != "numpy"] or ["numpy"]
    engines = [r.name for r in reg.available_backends() if r.name in REAL_ENGINES]
    scheduler = "cost"
    if argv[:1] == ["--scheduler"] and len(argv) > 1:
        scheduler, argv = argv[1], argv[2:]
    print(f"heterogeneous config: backends={accelerators}, backup='numpy', scheduler={scheduler!r}")
    models = [Path(a) if a.endswith(".onnx") else LIGHT / f"light_{a}.onnx" for a in argv] or \
        [LIGHT / f"light_{m}.onnx" for m in DEFAULT_MODELS]
    for path in models:
        demo(path, accelerators, scheduler, engines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
