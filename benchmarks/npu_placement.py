"""Partitions, output shapes and fp16 error of real models under the NPU config.

    python benchmarks/npu_placement.py MODEL.onnx[:feeds] [...] [--runs 3] [--backend-option K=V]

For each model: ``backends=["npu_emu", "onnxruntime"], precision="fp16"``
(the emulated fp16 NPU first), against raw ONNX Runtime (CPU provider) on the
same file and feeds: the partitions of the plan that ran (count and backends),
whether every output has ONNX Runtime's shape, the fp16 error (relative L2
``||ours - ort|| / ||ort||`` and ``max|err| / max|ort|``, the tolerances of
``benchmarks/real_models.py``: 2e-2 and 5e-2) and the NPU's share of nodes.
Each model is also compared with ONNX Runtime on a copy of the file whose
input dims are fixed to the feeds' (what the NPU's shape-specialized plan
sees), and with that copy's own difference from the dynamic file; long 1-D
outputs (audio) get a magnitude-spectrogram error too.
The NPU time is *simulated* (the chip's cost model, "npu est"); the host
milliseconds include the emulator running the program on the host.

Feeds: ``tokens`` (a ``[1, n]`` int64 id sequence plus ``style``/``speed``
for Kokoro-like TTS), ``text`` (input_ids / attention_mask / token_type_ids)
or ``audio`` (``[1, samples]`` float); the default is guessed from the input
names, or an ``.npz`` of feeds (a TTS model's real voice style: random
styles give degenerate durations, whose rounding even ONNX Runtime changes
between a dynamic and a static-shape copy of the file).  Models ship inside PyPI wheels (see ``benchmarks/real_models.py``);
this script downloads nothing.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

from nnrt_core import ScheduleConfig, Session

FP16_REL_L2, FP16_MAX_ABS = 2e-2, 5e-2
NPU = ["npu_emu", "onnxruntime"]


def feeds_for(path: Path, kind: str | None, length: int) -> dict[str, np.ndarray]:
    """Deterministic feeds for the model's inputs (see the module docstring)."""
    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    inputs = {i.name: i.type.tensor_type for i in m.graph.input if i.name not in inits}
    rng = np.random.default_rng(0)
    f: dict[str, np.ndarray] = {}
    for name, tt in inputs.items():
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in tt.shape.dim]
        if name == "sr":  # a VAD's sample rate
            f[name] = np.array(16000, np.int64)
            continue
        if name in ("state", "h", "c") or (name not in ("input", "tokens", "input_ids") and tt.elem_type == 1
                                           and len(dims) != 2):
            f[name] = np.zeros(dims, np.float32)  # recurrent state
            continue
        if name in ("tokens", "input_ids") or name == "input" and tt.elem_type == 7:
            ids = rng.integers(5, 150 if name == "tokens" else 3000, length)
            f[name] = np.array([[0 if name == "tokens" else 101, *ids, 0 if name == "tokens" else 102]], np.int64)
        elif "mask" in name:
            f[name] = np.ones((1, length + 2), np.int64)
        elif name == "token_type_ids":
            f[name] = np.zeros((1, length + 2), np.int64)
        elif name == "style":
            f[name] = (rng.standard_normal((1, 256)) * 0.1).astype(np.float32)
        elif name == "speed":
            f[name] = np.array([1.0], np.float32)
        else:  # audio: [1, 160 * length] samples of 16 kHz (512 where the file fixes it)
            n = dims[-1] if len(dims) == 2 and dims[-1] > 1 else length * 160
            t = np.linspace(0, n / 16000, n, dtype=np.float32)
            f[name] = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)[None]
    return f


def static_copy(path: Path, feeds: dict[str, np.ndarray]) -> bytes:
    """The model with every input's dims fixed to the feeds' (what a plan
    specialized to those shapes sees)."""
    m = onnx.load(str(path))
    for i in m.graph.input:
        if i.name in feeds:
            for d, n in zip(i.type.tensor_type.shape.dim, feeds[i.name].shape):
                d.ClearField("dim_param")
                d.dim_value = n
    return m.SerializeToString()


def spectral_rel_l2(a: np.ndarray, b: np.ndarray, n: int = 1024, hop: int = 256) -> float | None:
    """Relative L2 of the magnitude spectrogram (audio outputs: a waveform
    whose phase accumulates over thousands of samples differs sample by sample
    with any change of float order, even ONNX Runtime's own)."""
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    if a.shape != b.shape or a.size < 4 * n:
        return None
    win = np.hanning(n)
    spec = [np.abs(np.fft.rfft(np.lib.stride_tricks.sliding_window_view(x, n)[::hop] * win, axis=-1)) for x in (a, b)]
    return float(np.linalg.norm(spec[0] - spec[1]) / max(np.linalg.norm(spec[1]), 1e-30))


def _errors(ours: list, ref: list) -> list[tuple[float, float, float | None]]:
    """(rel L2, max|err| / max|ref|, spectral rel L2 or None) of each float output of equal shape."""
    errs = []
    for a, b in zip(ours, ref):
        if np.shape(a) != np.shape(b) or np.asarray(b).dtype.kind not in "fc":
            continue
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        errs.append((float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30)),
                     float(np.max(np.abs(a64 - b64)) / max(np.max(np.abs(b64)), 1e-30)), spectral_rel_l2(a, b)))
    return errs


def measure(path: Path, feeds: dict[str, np.ndarray], runs: int, backend_options: dict) -> dict:
    import onnxruntime as ort
    ref_sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = ref_sess.run(None, feeds)
    ref_static = ort.InferenceSession(static_copy(path, feeds), providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = Session(str(path), ScheduleConfig(backends=NPU, precision="fp16", backend_options=backend_options))
    ours = list(sess.run(feeds).values())
    parts = sess.partitions
    counts: dict[str, int] = {}
    for p in parts:
        counts[p.backend] = counts.get(p.backend, 0) + len(p.nodes)
    shapes_equal = all(np.shape(a) == np.shape(b) for a, b in zip(ours, ref))
    errs, errs_static, ort_self = _errors(ours, ref), _errors(ours, ref_static), _errors(ref_static, ref)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(feeds)
        times.append(time.perf_counter() - t0)
    npu_est = sum(p.details.get("est_time_ms", 0.0) or 0.0 for p in parts if p.backend == "npu_emu")
    return {"partitions": len(parts), "layout": [p.backend for p in parts], "nodes": counts,
            "shapes_equal": shapes_equal, "shapes": [list(np.shape(a)) for a in ours],
            "ref_shapes": [list(np.shape(b)) for b in ref],
            "rel_l2": max((e[0] for e in errs), default=0.0), "max_rel": max((e[1] for e in errs), default=0.0),
            "spectral": max((e[2] for e in errs if e[2] is not None), default=None),
            "vs_static": max((e[0] for e in errs_static), default=0.0),
            "ort_static_vs_dynamic": max((e[0] for e in ort_self), default=0.0),
            "ort_spectral_static_vs_dynamic": max((e[2] for e in ort_self if e[2] is not None), default=None),
            "host_ms": statistics.median(times) * 1e3 if times else float("nan"), "npu_est_ms": npu_est,
            "events": sorted({e.kind for e in sess.events})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="MODEL.onnx[:tokens|text|audio|FEEDS.npz]")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--length", type=int, default=30, help="tokens (or audio frames of 10 ms)")
    ap.add_argument("--ort-option", action="append", default=[], help="onnxruntime backend option K=V (V: true/false)")
    args = ap.parse_args(argv)
    opts: dict = {}
    for kv in args.ort_option:
        k, _, v = kv.partition("=")
        opts[k] = {"true": True, "false": False}.get(v.lower(), v)
    failed = 0
    for spec in args.models:
        file, _, kind = spec.partition(":")
        path = Path(file)
        feeds = dict(np.load(kind)) if kind.endswith(".npz") else feeds_for(path, kind or None, args.length)
        r = measure(path, feeds, args.runs, {"onnxruntime": opts} if opts else {})
        ok = r["shapes_equal"] and r["rel_l2"] <= FP16_REL_L2 and r["max_rel"] <= FP16_MAX_ABS
        failed += not ok
        print(f"{path.name}: partitions {r['partitions']} {r['layout'][:12]}{'...' if r['partitions'] > 12 else ''} "
              f"nodes {r['nodes']}; shapes equal to ORT: {r['shapes_equal']} {r['shapes']} vs {r['ref_shapes']}; "
              f"rel L2 {r['rel_l2']:.2e} max rel {r['max_rel']:.2e} ({'pass' if ok else 'FAIL'}); rel L2 vs ORT on a "
              f"static-shape copy {r['vs_static']:.2e} (ORT static vs dynamic {r['ort_static_vs_dynamic']:.2e}); "
              f"spectral rel L2 {r['spectral']} (ORT static vs dynamic {r['ort_spectral_static_vs_dynamic']}); host "
              f"{r['host_ms']:.1f} ms; npu est (simulated) {r['npu_est_ms']:.3f} ms; events {r['events']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
