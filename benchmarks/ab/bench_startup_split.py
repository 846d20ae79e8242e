"""Where an actor's start goes, warm (the shipped session file) against cold
(the model built): CPU milliseconds in a fresh process, after the same
one-node session ``bench_ray._startup`` runs first, split into the kernel and
plugin modules the start imports (timed apart: a probe process lists them,
the measured one imports them first) and the rest.

    python benchmarks/ab/bench_startup_split.py [--models squeezenet,resnet50] [--backends numpy,onnxruntime]
                                             [--runs 3]

No Ray: the file is read into a read-only array (as the object store hands
it over).  Medians of ``--runs`` processes, printed with the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import importlib, json, sys, time
import numpy as np
from nnrt_core import GraphBuilder, ScheduleConfig, Session
path, backend, mode, mods_file, probe = sys.argv[1:6]
cfg = ScheduleConfig(backends=[backend], backup="numpy", num_threads=1)
b = GraphBuilder("warmup")
b.output(b.relu(b.input("x", "float32", [1, 4])), "y")
Session(b.build(), cfg).run({"x": np.ones((1, 4), np.float32)})
data = np.fromfile(path, np.uint8)
data.flags.writeable = False
src = (memoryview(data),) if mode == "warm" else (data.tobytes(), cfg)
mods = [] if probe == "1" else json.load(open(mods_file))
c0 = time.process_time()
for m in mods:
    importlib.import_module(m)
imports = time.process_time() - c0
before = set(sys.modules)
c0 = time.process_time()
Session(*src)
rest = time.process_time() - c0
if probe == "1":
    json.dump(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("nnrt_numpy", "nnrt_onnxruntime",
                                                                               "scipy")), open(mods_file, "w"))
print(json.dumps({"imports": imports, "rest": rest}))
"""


def _files(name: str, backend: str, d: str) -> dict[str, str]:
    """The model file (cold) and its session file (warm, built through a model cache as ``ship`` does)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
    import bench_ray
    from nnrt_core import ScheduleConfig, Session
    from nnrt_core.storage.session_file import encode

    model = bench_ray.load_model(name, False)
    cfg = ScheduleConfig(backends=[backend], backup="numpy", num_threads=1)
    paths = {"cold": os.path.join(d, f"{name}.onnx"), "warm": os.path.join(d, f"{name}_{backend}.nnrt")}
    with open(paths["cold"], "wb") as f:
        f.write(model)
    with tempfile.TemporaryDirectory() as cache, open(paths["warm"], "wb") as f:
        f.write(encode(Session(model, cfg.replace(cache_dir=cache)).to_image()))
    return paths


def _child(path: str, backend: str, mode: str, mods: str, probe: bool) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, path, backend, mode, mods, "1" if probe else "0"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="squeezenet,resnet50")
    p.add_argument("--backends", default="numpy,onnxruntime")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        for backend in args.backends.split(","):
            for name in args.models.split(","):
                load0 = os.getloadavg()[0]
                paths = _files(name, backend, d)
                row = {}
                for mode in ("warm", "cold"):
                    mods = os.path.join(d, f"mods_{mode}.json")
                    _child(paths[mode], backend, mode, mods, probe=True)
                    runs = [_child(paths[mode], backend, mode, mods, probe=False) for _ in range(args.runs)]
                    row[mode] = {k: statistics.median(r[k] for r in runs) * 1e3 for k in ("imports", "rest")}
                w, c = row["warm"], row["cold"]
                print(f"{name:10s} {backend:11s} warm: imports {w['imports']:6.1f} + rest {w['rest']:6.1f} ms CPU; "
                      f"cold: imports {c['imports']:6.1f} + rest {c['rest']:6.1f}; warm/cold "
                      f"{(w['imports'] + w['rest']) / (c['imports'] + c['rest']):.3f} (without the imports "
                      f"{w['rest'] / c['rest']:.3f}); load average {load0:.1f} -> {os.getloadavg()[0]:.1f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
