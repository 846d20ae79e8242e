"""Do two source trees import the same IR?  Per model, ``load_model(path)``
(frontend plus node validation, no passes) is dumped and hashed in each tree:
graph inputs and outputs (names, types), every initializer (name, type,
dtype, shape, sha256 of its bytes), every node in order (name, domain,
opset, op, input and output names and types, attributes with array
attributes hashed, sub-graphs recursively) and the model metadata.

    python benchmarks/ab/import_identity_ab.py --base DIR [--models "GLOB,GLOB"]

Default models: every ``.tflite`` under /tmp/tflite_models.  Each tree runs
one child process for all models (``DIR`` and its plugin folders on
``PYTHONPATH``).  A model that fails to import in a tree is compared by its
error message.  Exit status 1 when anything differs.
"""
from __future__ import annotations

import argparse
import sys

from ort_identity_ab import ROOT, compare, model_paths, run_batch, short_name

CHILD = r"""
import hashlib, json, sys
import numpy as np
from nnrt_core.compiler.load import load_model
from nnrt_core.ir import Graph
h = lambda a: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]
def attr(v):
    if isinstance(v, Graph):
        return ["graph", graph(v)]
    if isinstance(v, np.ndarray):
        return ["array", str(v.dtype), list(v.shape), h(v)]
    if isinstance(v, (list, tuple)):
        return [attr(x) for x in v]
    return repr(v)
def value(v):
    return None if v is None else [v.name, repr(v.type)]
def graph(g):
    return {"inputs": [value(v) for v in g.inputs], "outputs": [value(v) for v in g.outputs],
            "initializers": [[v.name, repr(v.type), str(v.const.dtype), list(v.const.shape), h(v.const)]
                             for v in g.initializers.values()],
            "nodes": [[n.name, n.domain, n.opset, n.op_type, [value(v) for v in n.inputs],
                       [value(v) for v in n.outputs],
                       sorted([k, int(a.kind), attr(a.value)] for k, a in n.attributes.items())] for n in g.nodes]}
for path in sys.stdin.read().split("\n"):
    if not path:
        continue
    try:
        m = load_model(path)
        out = {"graph": graph(m.graph), "metadata": {k: str(v) for k, v in sorted(m.metadata.items())},
               "nodes": len(m.graph.nodes), "initializers": len(m.graph.initializers)}
    except Exception as e:
        out = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    print("RESULT " + json.dumps([path, out], default=str), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--models", default="/tmp/tflite_models/**/*.tflite", help="comma-separated globs (** recursive)")
    args = ap.parse_args()
    paths = model_paths(args.models)
    ours, base = (run_batch(tree, CHILD, paths) for tree in (ROOT, args.base))
    differ = 0
    for path in paths:
        a, b = ours[path], base[path]
        detail = a.get("error") or a.get("crash") or f"{a['nodes']} nodes, {a['initializers']} initializers"
        differ += not compare(short_name(path), a, b, detail)
    print(f"{len(paths) - differ} of {len(paths)} models import identically")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
