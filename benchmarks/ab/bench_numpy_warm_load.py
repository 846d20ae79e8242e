"""In-process cost of a NumPy warm load: ``Session(bytes of a session file)``
repeated on the same bytes, split into its stages (the session file's decode,
the stored partition's model load, the program build, the warm-up).

    python benchmarks/ab/bench_numpy_warm_load.py [--models squeezenet,resnet50] [--loads 20] [--formats 2,1]

The file is built as ``nnrt_ray.ship`` builds it (through a model cache) and
read into a read-only array (as Ray's object store hands it over).  Medians
of ``--loads`` loads after one untimed load, ms, with the load average.  A
fresh process pays more (imports, first page faults): see
``bench_startup_split.py`` and ``bench_ray_startup.py``.  ``--formats``:
the stored partition's formats to time, one after the other on the same
model (2: the graph as data; 1: the ONNX model, as written before format 2;
trees without format 2 ignore it).
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
import bench_ray  # noqa: E402

import nnrt_core.compiler.build as build  # noqa: E402
import nnrt_numpy.backend as numpy_backend  # noqa: E402
import nnrt_numpy.stored as stored  # noqa: E402
from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.storage.session_file import encode  # noqa: E402
from nnrt_numpy.program import GraphProgram  # noqa: E402

STAGES = {"decode": (build, "decode"), "stored model": (numpy_backend, "unpack"),
          "program": (GraphProgram, "__init__"), "warm-up": (numpy_backend.NumpyPartition, "warm_up")}


def _timed(spent: dict[str, list[float]]) -> None:
    """Wrap each stage's function so that its seconds go to ``spent``."""
    for name, (owner, attr) in STAGES.items():
        f = getattr(owner, attr)

        @functools.wraps(f)
        def wrapper(*a: Any, _f=f, _name=name, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                if spent[_name]:  # a timed load (not the build of the file)
                    spent[_name][-1] += time.perf_counter() - t0

        setattr(owner, attr, wrapper)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="squeezenet,resnet50")
    p.add_argument("--loads", type=int, default=20)
    p.add_argument("--formats", default="2,1")
    args = p.parse_args(argv)
    cfg = ScheduleConfig(backends=["numpy"], num_threads=1)
    spent: dict[str, list[float]] = {k: [] for k in [*STAGES, "total"]}
    _timed(spent)
    for name, fmt in [(n, f) for n in args.models.split(",") for f in args.formats.split(",")]:
        if not hasattr(stored, "pack_onnx") and fmt != args.formats.split(",")[0]:
            continue  # a tree with one format: timed once
        numpy_backend.pack = stored.pack_onnx if fmt == "1" and hasattr(stored, "pack_onnx") else stored.pack
        with tempfile.TemporaryDirectory() as d:
            data = np.frombuffer(encode(Session(bench_ray.load_model(name, False),
                                                cfg.replace(cache_dir=d)).to_image()), np.uint8)
        load0 = os.getloadavg()[0]
        Session(memoryview(data))
        for v in spent.values():
            v.clear()
        for _ in range(args.loads):
            for v in spent.values():
                v.append(0.0)
            t0 = time.perf_counter()
            Session(memoryview(data))
            spent["total"][-1] = time.perf_counter() - t0
        parts = "  ".join(f"{k} {statistics.median(v) * 1e3:6.2f}" for k, v in spent.items())
        label = f"format {fmt if hasattr(stored, 'pack_onnx') else 1}"
        print(f"{name:10s} {label} numpy warm load, ms (median of {args.loads}): {parts}  (load average "
              f"{load0:.1f} -> {os.getloadavg()[0]:.1f}; file {len(data) / 1e6:.1f} MB)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
