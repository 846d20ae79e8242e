"""NumPy backend vs raw ONNX Runtime on BERT-style encoders in the forms
ONNX Runtime's own tools write, in interleaved blocks in one process, each after the other side went idle (medians).

    python benchmarks/bench_contrib_transformers.py [--runs N] [--hidden H] [--layers L] [--seq S] [--json]

Variants of one MiniLM-sized encoder (tests/bert_like.py; hidden 384,
6 layers, 12 heads by default, batch 1):

* ``float``: the plain ONNX graph (MatMul/Add/LayerNormalization/Erf);
* ``fused``: ``onnxruntime.transformers.optimizer.optimize_model`` of it
  (EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu);
* ``int8``: ``onnxruntime.quantization.quantize_dynamic`` of it (QInt8
  weights; DynamicQuantizeLinear + MatMulInteger);
* ``int8_ort_opt``: ORT's saved extended-level optimization of ``int8``
  (DynamicQuantizeMatMul, MatMulIntegerToFloat, FusedMatMul).

Each round runs nnrt once and ORT once (nnrt first, then ORT, alternating);
the ratio is nnrt median / ORT median. Both sides use their default threads.
The 1-minute load average before and after is printed: on a shared machine
it says how far the numbers can be trusted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from nnrt_core import ScheduleConfig, Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bert_like import bert_like  # noqa: E402


def variants(hidden: int, layers: int, heads: int, folder: Path) -> dict[str, Path]:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    vocab = 1000
    out = {"float": folder / "float.onnx"}
    onnx.save(bert_like(hidden=hidden, layers=layers, num_heads=heads, vocab=vocab, max_positions=512), out["float"])
    fused = optimize_model(bert_like(hidden=hidden, layers=layers, num_heads=heads, vocab=vocab, max_positions=512),
                           model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0).model
    out["fused"] = folder / "fused.onnx"
    onnx.save(fused, out["fused"])
    out["int8"] = folder / "int8.onnx"
    quantize_dynamic(out["float"], out["int8"], weight_type=QuantType.QInt8)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(folder / "int8_ort_opt.onnx")
    ort.InferenceSession(str(out["int8"]), so, providers=["CPUExecutionProvider"])
    out["int8_ort_opt"] = folder / "int8_ort_opt.onnx"
    return out


#: runs per block; the pause before each block lets ONNX Runtime's intra-op threads stop spinning
#: (they spin ~0.1 s after a run and would take a core from the NumPy backend's BLAS threads)
BLOCK, IDLE_SECONDS = 5, 0.2


def measure(path: Path, feeds: dict[str, np.ndarray], runs: int) -> dict[str, float]:
    raw = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sess = Session(str(path), ScheduleConfig(backends=["numpy"]))
    want = raw.run(None, feeds)[0]
    got = np.asarray(next(iter(sess.run(feeds).values())))
    err = float(np.abs(got - want).max() / np.abs(want).max())
    for _ in range(3):  # warm both
        sess.run(feeds)
        raw.run(None, feeds)
    t_nnrt: list[float] = []
    t_ort: list[float] = []
    for _ in range(max(1, runs // BLOCK)):  # interleaved blocks, each after the other side's threads went idle
        for run, times in ((lambda: sess.run(feeds), t_nnrt), (lambda: raw.run(None, feeds), t_ort)):
            time.sleep(IDLE_SECONDS)
            for _ in range(BLOCK):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
    n, o = statistics.median(t_nnrt) * 1e3, statistics.median(t_ort) * 1e3
    return {"nnrt_ms": n, "ort_ms": o, "ratio": n / o, "max_err_of_max_ref": err}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--only", default="", help="comma-separated variants")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 1000, (1, args.seq)).astype(np.int64),
             "attention_mask": np.ones((1, args.seq), np.int64),
             "token_type_ids": np.zeros((1, args.seq), np.int64)}
    results = {}
    with tempfile.TemporaryDirectory() as d:
        for name, path in variants(args.hidden, args.layers, args.heads, Path(d)).items():
            if args.only and name not in args.only.split(","):
                continue
            results[name] = measure(path, feeds, args.runs)
            if not args.json:
                r = results[name]
                print(f"{name:14s} nnrt {r['nnrt_ms']:8.2f} ms  ort {r['ort_ms']:8.2f} ms  ratio {r['ratio']:5.2f}  "
                      f"err {r['max_err_of_max_ref']:.2e}", flush=True)
    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"results": results, "load_before": load_before, "load_after": load_after}, indent=1))
    else:
        print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after; "
              f"hidden {args.hidden}, layers {args.layers}, seq {args.seq}, runs {args.runs}")


if __name__ == "__main__":
    main()
