"""Do two source trees give the same placement report?  Per model and config,
the events of the build (read before the report), then the placement report
(every node's backend, partition, reason and every backend's rejections), the
events again and the partitions' backends, compared between this tree and
``--base``.

    python benchmarks/ab/placement_report_ab.py --base DIR [--models "GLOB,GLOB"]
                                             [--configs "onnxruntime;onnxruntime,numpy;npu_emu"]

Each config is a ``backends`` list (``,``-separated; the backup is the
default, ``numpy``); configs are separated by ``;``.  Each tree builds in its
own child process (``DIR`` and its plugin folders on ``PYTHONPATH``).  This
tree's children also say whether the backup's capability was still unasked
after the build (``deferred``; not compared).  Exit status 1 when anything
differs.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

from ort_identity_ab import ONNX_LIGHT, PYPI, ROOT, compare, model_paths, run_child, short_name, tree_env

MOBILE = "/tmp/pypi_models/**/*cls*.onnx"

CHILD = r"""
import json, sys
from nnrt_core import ScheduleConfig, Session
path, backends = sys.argv[1], sys.argv[2].split(",")
out = {}
try:
    s = Session(path, ScheduleConfig(backends=backends))
    cm = s.compiled_model
    out["events_before"] = [e.to_dict() for e in s.events]
    report = cm.placement  # computed now
    out["report"] = [p.to_dict() for p in report]
    out["events_after"] = [e.to_dict() for e in s.events]
    out["partitions"] = [p.backend for p in s.partitions]
except Exception as e:
    out["build_error"] = f"{type(e).__name__}: {str(e)[:300]}"
print("RESULT " + json.dumps(out, sort_keys=True))
"""

PENDING = r"""
import sys
from nnrt_core import ScheduleConfig, Session
from nnrt_core.compiler import place
seen = []
real = place.Placement.__init__
def spy(self, context, *a, **k):
    seen.append(context)
    real(self, context, *a, **k)
place.Placement.__init__ = spy
try:
    Session(sys.argv[1], ScheduleConfig(backends=sys.argv[2].split(",")))
    caps = seen[-1].capabilities.values() if seen else ()
    print("PENDING", any(getattr(c, "pending", False) for c in caps))
except Exception as e:
    print("PENDING error", type(e).__name__)
"""


def deferred(path: str, backends: str) -> str:
    proc = subprocess.run([sys.executable, "-c", PENDING, path, backends], capture_output=True, text=True,
                          env=tree_env(ROOT), cwd=ROOT)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("PENDING ")), "PENDING ?")
    return {"True": "deferred", "False": "asked"}.get(line[8:], line[8:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--models", default=f"{ONNX_LIGHT},{PYPI}", help="comma-separated globs (** recursive)")
    ap.add_argument("--configs", default="onnxruntime;onnxruntime,numpy;npu_emu",
                    help="';'-separated backends lists")
    args = ap.parse_args()
    paths = model_paths(args.models)
    differ = total = 0
    for path in paths:
        name = short_name(path)
        for backends in args.configs.split(";"):
            ours, base = (run_child(tree, CHILD, path, backends) for tree in (ROOT, args.base))
            total += 1
            detail = ours.get("build_error") or ours.get("crash") or \
                f"{len(ours['report'])} nodes, {len(ours['events_after'])} events, {deferred(path, backends)}"
            differ += not compare(f"{name} [{backends}]", ours, base, detail)
    print(f"{total - differ} of {total} builds give the same events and placement report")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
