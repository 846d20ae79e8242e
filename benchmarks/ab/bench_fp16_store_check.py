"""Cost of the emulated NPU's fp16 overflow check on its store path, A/B in one process.

    python benchmarks/ab/bench_fp16_store_check.py [--base /tmp/base-s12] [--runs 201]

Times :func:`nnrt_npu_emu.numerics.store_fp16` (rounds a store and says
whether it saturated) against the ``round_fp16`` of the tree at ``--base``
(a checkout without the check, its ``numerics.py`` loaded under another module
name), interleaved, on stores of 1K to 1M elements of typical activations
(normal, scale 3: no overflow, the common case), for the general clamp and
the positive clamp of a fused Relu.  Prints the median process CPU time per
call of each, their ratio, and the 1-minute load average before and after.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from pathlib import Path

import numpy as np

from nnrt_npu_emu.hostfuse import RELU_LO
from nnrt_npu_emu.numerics import FP16_MAX, store_fp16


def _base(root: str):
    path = Path(root) / "plugins" / "npu_emu" / "nnrt_npu_emu" / "numerics.py"
    spec = importlib.util.spec_from_file_location("base_numerics", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _cpu(fn, reps: int) -> float:
    c0 = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - c0) / reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="/tmp/base-s12")
    ap.add_argument("--runs", type=int, default=201)
    args = ap.parse_args()
    base = _base(args.base)
    hi = np.float32(FP16_MAX)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'elements':>9} {'clamp':>8} {'base us':>9} {'check us':>9} {'ratio':>6}")
    rng = np.random.default_rng(0)
    for n in (1 << 10, 1 << 14, 1 << 17, 1 << 20):
        src = (rng.standard_normal(n) * 3).astype(np.float32)
        out, scratch = np.empty_like(src), np.empty(n, np.uint32)
        reps = max(1, (1 << 22) // n)
        for name, lo in (("general", np.float32(-FP16_MAX)), ("relu", RELU_LO)):
            a = lambda: base.round_fp16(out, scratch, lo, hi, src)  # noqa: E731
            b = lambda: store_fp16(out, scratch, lo, hi, src)  # noqa: E731
            ta, tb = [], []
            for r in range(args.runs):
                for which in ((a, ta), (b, tb)) if r % 2 else ((b, tb), (a, ta)):
                    which[1].append(_cpu(which[0], reps))
            ma, mb = statistics.median(ta) * 1e6, statistics.median(tb) * 1e6
            print(f"{n:>9} {name:>8} {ma:>9.2f} {mb:>9.2f} {mb / ma:>6.3f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
