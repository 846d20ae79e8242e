"""Cold (compile) vs warm (model cache) session creation, interleaved.

    python benchmarks/bench_model_cache.py [--runs N] [--models resnet50] [--json]

For every model and backend list, each round builds one session with an
empty cache directory (cold: load, optimize, place, compile, write the cache)
and one with the cache that cold run wrote (warm: read and load the compiled
partitions).  Reports the medians and warm / cold (target <= 0.1 on ResNet50
with the ONNX Runtime and NPU backends).  Both sides produce the same outputs
(checked).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
CONFIGS = {"onnxruntime": ["onnxruntime"], "npu_emu": ["npu_emu"], "npu_emu+onnxruntime": ["npu_emu", "onnxruntime"]}


def measure(model: Path, backends: list[str], runs: int) -> dict:
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            cfg = ScheduleConfig(backends=backends, cache_dir=d, precision="fp16" if "npu_emu" in backends else "fp32")
            a = Session(model, cfg)
            b = Session(model, cfg)
            assert not a.cache_hit and b.cache_hit
            feeds = {i.name: np.random.default_rng(0).standard_normal(
                [x if isinstance(x, int) else 1 for x in i.shape]).astype(np.float32) for i in a.inputs}
            for k, v in a.run(feeds).items():
                np.testing.assert_array_equal(v, b.run(feeds)[k])
            cold.append(a.build_seconds)
            warm.append(b.build_seconds)
            size = sum(p.stat().st_size for p in Path(d).iterdir())
    c, w = statistics.median(cold), statistics.median(warm)
    return {"cold_ms": c * 1e3, "warm_ms": w * 1e3, "ratio": w / c, "cache_mb": size / 1e6,
            "partitions": [p.backend for p in b.partitions]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--models", default="resnet50,squeezenet")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        for cname in args.configs.split(","):
            r = measure(LIGHT / f"light_{name}.onnx", CONFIGS[cname], args.runs)
            rows.append({"model": name, "backends": cname, **r})
            if not args.json:
                print(f"{name:12s} {cname:22s} cold {r['cold_ms']:8.1f} ms  warm {r['warm_ms']:7.1f} ms  "
                      f"warm/cold {r['ratio']:.3f}  cache {r['cache_mb']:.1f} MB  partitions {r['partitions']}",
                      flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
