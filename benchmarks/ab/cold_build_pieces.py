"""Where a fresh process's ``Session(...)`` build goes, piece by piece:
main-thread CPU milliseconds (``time.thread_time``) of the build's parts in a
fresh process, medians over ``--rounds`` processes, with the stage wall times
of ``Session.stats()["build"]``.

    python benchmarks/ab/cold_build_pieces.py [--model mobile|light|PATH] [--backend onnxruntime]
                                           [--rounds 7] [--base DIR] [--warm]

The child imports numpy, onnxruntime and ``nnrt_core`` first, and the backend
plugin's modules the pieces live in (their import is the select stage's, not
timed here); then it wraps these functions with a CPU-time counter:

* load: ``_parse_source`` (read + protobuf parse), ``load_external_data``,
  ``_check`` (the ONNX checker; its first call in a process builds onnx's
  operator-schema registry, ~10 ms), ``validate_model`` (both calls),
  ``onnx_lite.infer_shapes``, ``model_from_proto`` (protos -> IR), the
  topological sort;
* optimize: every pass's ``run``, ``share_graph_weights``, ``check_static_sizes``;
* place: each backend's ``capability`` (the backup's too), the scheduler,
  ``PartitionPlan.to_graph``;
* compile: each backend's ``compile``; for onnxruntime also the IR version
  probe, ``to_onnx`` and ORT's own session creation (``_create_session``).

Nested pieces overlap (``compile:onnxruntime`` holds ``ort.*``).  ``--warm``
times a second build of the same model in the process instead (what is
first-use cost shows as the difference).  ``--base DIR`` runs another source
tree's children interleaved (its plugin folders on ``PYTHONPATH``) and prints
both columns.  Load averages are printed: on a shared machine compare columns
of one run only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: the shared benchmark modules
from bench_cold_start import child_env, models, result_of  # noqa: E402
from cold_start_breakdown import tree_env  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

CHILD = r"""
import functools, json, sys, time
path, backend, warm = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
import numpy, onnxruntime
from nnrt_core import ScheduleConfig, Session
import nnrt_core.session, nnrt_core.compiler.build as B, nnrt_core.compiler.place as PL
import nnrt_core.frontends.onnx.load as L, nnrt_core.frontends.onnx.onnx_lite as OL
import nnrt_core.passes.manager as PM, nnrt_core.passes.shapes as PS
import nnrt_core.backend.base as BB, nnrt_core.placement.partitioning as PP, nnrt_core.ir.graph as IG
acc = {}
def wrap(orig, label):
    @functools.wraps(orig)
    def w(*a, **k):
        lab = label(a) if callable(label) else label
        t = time.thread_time()
        try:
            return orig(*a, **k)
        finally:
            acc[lab] = acc.get(lab, 0.0) + time.thread_time() - t
    return w
def fn(mod, attr, label):
    orig = getattr(mod, attr)
    new = wrap(orig, label)
    for m in list(sys.modules.values()):
        try:
            if getattr(m, attr, None) is orig:
                setattr(m, attr, new)
        except Exception:
            pass
def meth(cls, attr, label):
    setattr(cls, attr, wrap(getattr(cls, attr), label))
fn(L, "_parse_source", "load.parse"); fn(L, "load_external_data", "load.external_data")
fn(L, "_check", "load.checker"); fn(L, "validate_model", "load.validate")
fn(OL, "infer_shapes", "load.infer_shapes (onnx)"); fn(L, "model_from_proto", "load.convert")
meth(IG.Graph, "topological_sort", "load.topological_sort")
for cls in PM.ALL_PASSES + (PS.StaticShapeRefinement,):
    meth(cls, "run", "optimize." + cls.name)
fn(B, "share_graph_weights", "optimize.share_weights"); fn(B, "check_static_sizes", "optimize.check_sizes")
meth(BB.Backend, "capability", lambda a: "place.capability:" + a[0].name)
fn(PL, "_schedule", "place.schedule"); meth(PP.PartitionPlan, "to_graph", "place.to_graph")
meth(BB.Backend, "compile", lambda a: "compile:" + a[0].name)
if backend == "onnxruntime":
    import nnrt_onnxruntime.backend, nnrt_onnxruntime.export as E, nnrt_onnxruntime.partition as PA
    fn(E, "max_ir_version", "compile.ort.ir_version_probe"); fn(E, "to_onnx", "compile.ort.to_onnx")
    fn(PA, "_create_session", "compile.ort.InferenceSession")
if warm:
    Session(path, ScheduleConfig(backends=[backend]))
    acc.clear()
t0 = time.thread_time()
s = Session(path, ScheduleConfig(backends=[backend]))
acc["Session(...) total"] = time.thread_time() - t0
acc.update({"stage (wall) " + k: v for k, v in s.stats()["build"].items()})
print("RESULT " + json.dumps(acc))
"""


def run_child(path: str, backend: str, warm: bool, env: dict[str, str], cwd: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", CHILD, path, backend, "1" if warm else "0"],
                          capture_output=True, text=True, env=env, cwd=cwd)
    return result_of(proc, "build pieces")


def _order(key: str) -> tuple:
    head = key.split(".")[0].split(":")[0].split(" ")[0]
    rank = {"Session(...)": 0, "load": 1, "optimize": 2, "place": 3, "compile": 4, "stage": 5}
    return rank.get(head, 9), key


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobile", help="mobile (PP-OCR cls), light (SqueezeNet) or a path")
    ap.add_argument("--backend", default="onnxruntime")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--warm", action="store_true", help="time a second build in the process instead")
    ap.add_argument("--base", help="another source tree, run interleaved as a second column")
    args = ap.parse_args()
    if args.model in ("mobile", "light"):
        (model,) = models([args.model], args.batch) or [None]
        if model is None:
            raise SystemExit("model not found")
        path = str(model["path"])
    else:
        path = args.model
    env = child_env(False)
    sides = {"this tree": (env, ROOT)}
    if args.base:
        sides["base"] = (tree_env(env, args.base), args.base)
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for e, cwd in sides.values():
        run_child(path, args.backend, args.warm, e, cwd)  # byte-code caches written
    rows: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
    for r in range(args.rounds):
        for s in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            rows[s].append(run_child(path, args.backend, args.warm, *sides[s]))
    keys = sorted({k for rs in rows.values() for r in rs for k in r}, key=_order)
    print(f"{os.path.basename(path)}, backends=[{args.backend!r}], {'warm' if args.warm else 'fresh'} process: "
          f"medians of {args.rounds}, ms (main-thread CPU; stages: wall); "
          f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  {'piece':44s}" + "".join(f"{s:>12s}" for s in sides) + ("     change" if args.base else ""))
    for k in keys:
        med = [statistics.median(r.get(k, 0.0) for r in rows[s]) * 1e3 for s in sides]
        change = f"   {med[0] - med[1]:+8.2f}" if args.base else ""
        print(f"  {k:44s}" + "".join(f"{m:12.2f}" for m in med) + change)


if __name__ == "__main__":
    main()
