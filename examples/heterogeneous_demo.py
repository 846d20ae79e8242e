"""Heterogeneous demo: real models from the onnx package run across every
installed backend at once, compared against the NumPy reference backend.

    python examples/heterogeneous_demo.py [MODEL ...]   (default: a few light models)

For each model it prints where every partition runs, the per-run latency, and
the largest difference from the reference backend's outputs.
"""
from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session, default_registry

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
DEFAULT_MODELS = ["squeezenet", "resnet50", "inception_v1", "zfnet512"]


def median_ms(sess: Session, feeds: dict, runs: int = 5) -> float:
    sess.run(feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(feeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e3)


def demo(path: Path, accelerators: list[str]) -> None:
    print(f"\n=== {path.name}")
    reference = Session(path, ScheduleConfig(backends=["numpy"]))
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.random(tuple(d if isinstance(d, int) else 1 for d in i.shape), dtype=np.float32)
             for i in reference.inputs}
    hetero = Session(path, ScheduleConfig(backends=accelerators, backup="numpy"))
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
    print(f"latency: heterogeneous {median_ms(hetero, feeds):.1f} ms, numpy-only {median_ms(reference, feeds):.1f} ms;"
          f" max |diff| vs reference {diff:.2e}")


def main(argv: list[str]) -> int:
    reg = default_registry()
    print("backends:")
    for r in sorted(reg.backends.values(), key=lambda r: -r.priority):
        print(f"  {r.name:<12} priority {r.priority:>4}  {'available' if r.available else 'unavailable: ' + str(r.reason)}")
    accelerators = [r.name for r in reg.available_backends() if r.name != "numpy"] or ["numpy"]
    print(f"heterogeneous config: backends={accelerators}, backup='numpy'")
    models = [Path(a) if a.endswith(".onnx") else LIGHT / f"light_{a}.onnx" for a in argv] or \
        [LIGHT / f"light_{m}.onnx" for m in DEFAULT_MODELS]
    for path in models:
        demo(path, accelerators)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
