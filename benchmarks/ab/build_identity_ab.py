"""Do two source trees build the same sessions?  Per model: what the passes
did (node and op counts after, rewrites per pass), the placement report
(every node's backend, partition and reason), the partitions' backends and
node names, the events, and the outputs of one run (sha256 of their bytes),
compared between this tree and ``--base``.

    python benchmarks/ab/build_identity_ab.py --base DIR [--models "GLOB,GLOB"] [--backends numpy] [--level basic]

Default models: every ``.tflite`` under /tmp/tflite_models and the ONNX
models of ``benchmarks/real_models.py`` (/tmp/pypi_models).  Each tree runs
one child process for all models (``DIR`` and its plugin folders on
``PYTHONPATH``); feeds are seeded random tensors of each input's dtype
(free dimensions 64 but the first, 1; all 1 when that fails to run;
integers 0 or 1).  The pass manager's sweep count and timings are not
compared (they are what a faster build may change).  Exit status 1 when
anything differs.
"""
from __future__ import annotations

import argparse
import sys

from ort_identity_ab import ROOT, compare, model_paths, run_batch, short_name

DEFAULT_MODELS = "/tmp/tflite_models/**/*.tflite,/tmp/pypi_models/**/*.onnx"

CHILD = r"""
import hashlib, json, logging, sys
import numpy as np
logging.disable(logging.WARNING)
from nnrt_core import ScheduleConfig, Session
backends, level = sys.argv[1].split(","), sys.argv[2]
h = lambda b: hashlib.sha256(bytes(b)).hexdigest()[:16]
for path in sys.stdin.read().split("\n"):
    if not path:
        continue
    out = {}
    try:
        s = Session(path, ScheduleConfig(backends=backends, optimization_level=level))
        r = s.pass_report
        out["passes"] = [r.nodes_before, r.nodes_after, r.ops_after,
                         {k: [v.rewrites, v.nodes_removed, v.nodes_added, v.notes] for k, v in r.passes.items()}]
        out["placement"] = [p.to_dict() for p in s.compiled_model.placement]
        out["partitions"] = [[p.backend, list(p.nodes)] for p in s.partitions]
        out["events"] = [e.to_dict() for e in s.events]
        def feeds(free):
            rng, out_ = np.random.default_rng(0), {}
            for t in s.inputs:
                shape = [d if isinstance(d, int) else (1 if i == 0 else free) for i, d in enumerate(t.shape or ())]
                dt = np.dtype(t.dtype) if t.dtype is not None else np.dtype(np.float32)
                if dt.kind in "iu":
                    out_[t.name] = rng.integers(0, 2, shape).astype(dt)
                elif dt.kind == "b":
                    out_[t.name] = rng.integers(0, 2, shape).astype(bool)
                else:
                    out_[t.name] = rng.standard_normal(shape).astype(dt)
            return out_
        for free in (64, 1):  # free dimensions: 64 (batch 1), else all 1
            try:
                res = s.run(feeds(free))
                out["outputs"] = {k: h(np.ascontiguousarray(v).tobytes()) for k, v in sorted(res.items())}
                out.pop("run_error", None)
                break
            except Exception as e:
                out["run_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    except Exception as e:
        out["build_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    print("RESULT " + json.dumps([path, out], default=str), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated globs (** recursive)")
    ap.add_argument("--backends", default="numpy")
    ap.add_argument("--level", default="basic", help="optimization level (none, basic, extended, all)")
    args = ap.parse_args()
    paths = model_paths(args.models)
    ours, base = (run_batch(tree, CHILD, paths, args.backends, args.level) for tree in (ROOT, args.base))
    differ = 0
    for path in paths:
        a, b = ours[path], base[path]
        detail = a.get("build_error") or a.get("run_error") or a.get("crash") or \
            f"{a['passes'][1]} nodes, {len(a['partitions'])} partition(s), {len(a.get('outputs', {}))} output(s)"
        differ += not compare(short_name(path), a, b, detail)
    print(f"{len(paths) - differ} of {len(paths)} models identical (passes, placement, partitions, events, outputs)")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
