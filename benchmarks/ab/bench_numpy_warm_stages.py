"""Where a fresh process's NumPy warm start goes: thread CPU ms of each stage
of ``Session(file)``, against a cold build of the same model.

    python benchmarks/ab/bench_numpy_warm_stages.py [--models squeezenet,resnet50] [--real-weights]
                                                 [--runs 5] [--formats 2,1]

Each start is a fresh child process that first does what ``bench_ray._startup``
does before its timed part (imports, a one-node session on the same config),
then times ``Session(file)`` (warm: the file read into a read-only array, as
Ray hands it over) or ``Session(model, config)`` (cold), with the stages
wrapped: the session file's decode, the stored partition's load (format 1:
``load_onnx``'s schema validation and ONNX -> IR conversion apart; format 2:
the JSON decode and ``validate_graph`` apart), the kernel-module imports,
the program build and the warm-up (arena and heap pages apart).  Children
get a user's byte-code cache (as ``bench_ray.py``'s workers), one untimed
start of each kind runs first; medians of ``--runs``, with the load average.
``--formats``: the stored partition's formats (2: the graph as data; 1: the
ONNX model, as written before format 2).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: the shared benchmark modules
from bench_cold_start import result_of  # noqa: E402

HERE = Path(__file__).resolve().parent.parent  # benchmarks/: the shared benchmark modules
CHILD = r"""
import functools, importlib, json, sys, time
import numpy as np
kind, path = sys.argv[1], sys.argv[2]
from nnrt_core import GraphBuilder, ScheduleConfig, Session
cfg = ScheduleConfig(backends=["numpy"], backup="numpy", num_threads=1)
b = GraphBuilder("warmup")
b.output(b.relu(b.input("x", "float32", [1, 4])), "y")
Session(b.build(), cfg).run({"x": np.ones((1, 4), np.float32)})
spent = {}
STAGES = [("nnrt_core.compiler.build", "decode", "decode"), ("nnrt_numpy.backend", "unpack", "stored partition"),
          ("nnrt_core.frontends.onnx.load", "validate_model", "  schema validation (ONNX)"),
          ("nnrt_core.frontends.onnx.load", "model_from_proto", "  ONNX -> IR"),
          ("nnrt_numpy.stored_graph", "validate_graph", "  validate_graph"),
          ("nnrt_numpy.program", "GraphProgram.__init__", "program"),
          ("nnrt_numpy.kernel", "KernelRegistry._import", "  kernel-module imports"),
          ("nnrt_numpy.backend", "NumpyPartition.warm_up", "warm-up"),
          ("nnrt_numpy.arena", "ArenaPlan.prefault", "  arena pages"),
          ("nnrt_numpy.backend", "prefault_heap", "  heap pages")]
for mod, attr, label in STAGES:
    try:
        owner = importlib.import_module(mod)
    except ImportError:
        continue
    if "." in attr:
        cls, attr = attr.split(".")
        owner = getattr(owner, cls)
    f = getattr(owner, attr, None)
    if f is None:
        continue
    def wrapped(*a, _f=f, _label=label, **k):
        t0 = time.thread_time()
        try:
            return _f(*a, **k)
        finally:
            spent[_label] = spent.get(_label, 0.0) + time.thread_time() - t0
    setattr(owner, attr, functools.wraps(f)(wrapped))
if kind == "warm":
    data = np.frombuffer(open(path, "rb").read(), np.uint8)
    data.flags.writeable = False
    start = lambda: Session(memoryview(data))
else:
    model = open(path, "rb").read()
    start = lambda: Session(model, cfg)
t0 = time.thread_time()
start()
spent["total"] = time.thread_time() - t0
print("RESULT " + json.dumps({k: v * 1e3 for k, v in spent.items()}))
"""


ORDER = ["decode", "stored partition", "schema validation (ONNX)", "ONNX -> IR", "validate_graph", "program",
         "kernel-module imports", "warm-up", "arena pages", "heap pages"]


def _child(kind: str, path: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, kind, path], capture_output=True, text=True, env=env)
    return result_of(proc, kind)


def _files(name: str, real: bool, formats: list[str], d: str) -> dict[str, str]:
    """The model's bytes and its session file in each format, written under ``d``."""
    sys.path.insert(0, str(HERE))
    import bench_ray
    import nnrt_numpy.backend as numpy_backend
    import nnrt_numpy.stored as stored
    from nnrt_core import ScheduleConfig, Session
    from nnrt_core.storage.session_file import encode

    cfg = ScheduleConfig(backends=["numpy"], backup="numpy", num_threads=1)
    model = bench_ray.load_model(name, real)
    out = {"cold": os.path.join(d, f"{name}.onnx")}
    Path(out["cold"]).write_bytes(model)
    for fmt in formats:
        numpy_backend.pack = stored.pack_onnx if fmt == "1" and hasattr(stored, "pack_onnx") else stored.pack
        with tempfile.TemporaryDirectory() as cache:  # as nnrt_ray.ship builds it
            data = encode(Session(model, cfg.replace(cache_dir=cache)).to_image())
        out[f"format {fmt}"] = os.path.join(d, f"{name}.f{fmt}.nnrt")
        Path(out[f"format {fmt}"]).write_bytes(data)
    numpy_backend.pack = stored.pack
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="squeezenet,resnet50")
    p.add_argument("--real-weights", action="store_true")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--formats", default="2,1")
    args = p.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from bench_cold_start import child_env

    env = child_env(False)
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as d:
            files = _files(name, args.real_weights, args.formats.split(","), d)
            load0 = os.getloadavg()[0]
            runs: dict[str, list[dict]] = {k: [] for k in files}
            for kind, path in files.items():  # untimed: byte-code written, files cached
                _child("cold" if kind == "cold" else "warm", path, env)
            for _ in range(args.runs):
                for kind, path in files.items():
                    runs[kind].append(_child("cold" if kind == "cold" else "warm", path, env))
        cold = statistics.median(r["total"] for r in runs["cold"])
        print(f"{name} ({'real weights' if args.real_weights else 'fills'}), thread CPU ms, medians of "
              f"{args.runs} fresh processes (load average {load0:.1f} -> {os.getloadavg()[0]:.1f}):")
        for kind, rs in runs.items():
            total = statistics.median(r["total"] for r in rs)
            stages = sorted((k for k in rs[0] if k != "total"), key=lambda k: ORDER.index(k.strip()))
            parts = ", ".join(f"{k.strip()} {statistics.median(r.get(k, 0.0) for r in rs):.2f}" for k in stages)
            ratio = f" = {total / cold:.3f} x cold" if kind != "cold" else ""
            print(f"  {kind:9s} total {total:7.2f}{ratio}  ({parts})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
