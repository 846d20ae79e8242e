"""Are two source trees' ONNX Runtime builds the same?  Per model, the
partitions handed to ORT (their stored bytes: the ONNX model, or ORT's
optimized graph, and the weights) and the outputs of one run, compared byte
for byte between this tree and ``--base``.

    python benchmarks/ab/ort_identity_ab.py --base DIR [--models "GLOB,GLOB"] [--backends onnxruntime]

Each tree builds ``Session(path, ScheduleConfig(backends=[...]))`` in its own
child process (``DIR`` and its plugin folders on ``PYTHONPATH``); the feeds
are seeded random tensors of each input's dtype, free dimensions 1 (integer
inputs 0..9).  A model either tree cannot build or run prints its error (the
same error in both counts as the same).  Exit status 1 when anything differs.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
ONNX_LIGHT = "<onnx>/backend/test/data/light/*.onnx"
PYPI = "/tmp/pypi_models/**/*.onnx"

CHILD = r"""
import hashlib, json, sys
import numpy as np
from nnrt_core import ScheduleConfig, Session
path, backends = sys.argv[1], sys.argv[2].split(",")
h = lambda b: hashlib.sha256(bytes(b)).hexdigest()[:16]
out = {}
try:
    s = Session(path, ScheduleConfig(backends=backends))
    out["partitions"] = [[p.backend, h(p.blob)] for p in s.to_image().partitions]
    rng = np.random.default_rng(0)
    feeds = {}
    for t in s.inputs:
        shape = [d if isinstance(d, int) else 1 for d in (t.shape or ())]
        dt = np.dtype(t.dtype) if t.dtype is not None else np.dtype(np.float32)
        if dt.kind in "iu":
            feeds[t.name] = rng.integers(0, 10, shape).astype(dt)
        elif dt.kind == "b":
            feeds[t.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[t.name] = rng.standard_normal(shape).astype(dt)
    try:
        res = s.run(feeds)
        out["outputs"] = {k: h(np.ascontiguousarray(v).tobytes()) for k, v in sorted(res.items())}
    except Exception as e:
        out["run_error"] = f"{type(e).__name__}: {str(e)[:200]}"
except Exception as e:
    out["build_error"] = f"{type(e).__name__}: {str(e)[:200]}"
print("RESULT " + json.dumps(out))
"""


def tree_env(tree: str) -> dict[str, str]:
    parts = [tree] + [os.path.join(tree, d) for d in ("plugins/numpy", "plugins/npu_emu", "plugins/onnxruntime",
                                                      "schedulers", "plugins/ray")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(parts)}


def run_child(tree: str, child: str, path: str, backends: str) -> dict:
    """The ``RESULT`` json that script ``child`` prints for ``path`` and ``backends`` under ``tree``'s code."""
    proc = subprocess.run([sys.executable, "-c", child, path, backends], capture_output=True, text=True,
                          env=tree_env(tree), cwd=tree)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    return json.loads(line[7:]) if line else {"crash": f"exit {proc.returncode}: {proc.stderr[-300:]}"}


def run_batch(tree: str, child: str, paths: list[str], *args: str) -> dict[str, dict]:
    """path -> the ``RESULT [path, result]`` json that script ``child`` (given
    ``args``, the paths one per line on stdin) prints for every model under
    ``tree``'s code; a model it printed nothing for maps to the crash."""
    proc = subprocess.run([sys.executable, "-c", child, *args], input="\n".join(paths), capture_output=True, text=True,
                          env=tree_env(tree), cwd=tree)
    found = dict(json.loads(ln[7:]) for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    crash = {"crash": f"exit {proc.returncode}: {proc.stderr[-300:]}"}
    return {p: found.get(p, crash) for p in paths}


def model_paths(globs: str) -> list[str]:
    """The files of the comma-separated ``globs`` (``<onnx>``: the onnx package's folder; ``**`` recursive)."""
    import onnx

    light = os.path.dirname(onnx.__file__)
    return sorted({p for g in globs.split(",") for p in glob.glob(g.replace("<onnx>", light), recursive=True)})


def short_name(path: str) -> str:
    """A model's path relative to /tmp (where the real models are), else its file name."""
    return os.path.relpath(path, "/tmp") if path.startswith("/tmp") else os.path.basename(path)


def compare(label: str, ours: dict, base: dict, detail: str) -> bool:
    """Print ``same``/``DIFFERENT`` for one model (and each key whose value
    differs between the trees); True when the two results are equal."""
    same = ours == base
    print(f"{'same' if same else 'DIFFERENT':9s} {label}: {detail}", flush=True)
    if not same:
        for k in sorted(set(ours) | set(base)):
            if ours.get(k) != base.get(k):
                print(f"    {k}: this tree {json.dumps(ours.get(k))[:400]}\n    {k}: base      "
                      f"{json.dumps(base.get(k))[:400]}")
    return same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--models", default=f"{ONNX_LIGHT},{PYPI}", help="comma-separated globs (** recursive)")
    ap.add_argument("--backends", default="onnxruntime")
    args = ap.parse_args()
    paths = model_paths(args.models)
    differ = 0
    for path in paths:
        ours, base = (run_child(tree, CHILD, path, args.backends) for tree in (ROOT, args.base))
        detail = ours.get("build_error") or ours.get("run_error") or ours.get("crash") or \
            f"{len(ours.get('partitions', []))} partition(s), {len(ours.get('outputs', {}))} output(s)"
        differ += not compare(short_name(path), ours, base, detail)
    print(f"{len(paths) - differ} of {len(paths)} models identical (partitions and outputs)")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
