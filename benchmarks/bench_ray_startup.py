"""Actor start-up only, warm (the shipped compiled file) against cold (the
model built in the actor), with the code of any nnrt tree: before/after
comparisons of ``benchmarks/bench_ray.py``'s start-up figures.

    PYTHONPATH=TREE:TREE/plugins/numpy:TREE/plugins/onnxruntime:TREE/plugins/npu_emu:TREE/schedulers:TREE/plugins/ray \\
        python benchmarks/bench_ray_startup.py --tree TREE [--models squeezenet,resnet50]
                                               [--backends onnxruntime,numpy] [--starts 5] [--real-weights]
                                               [--numpy-formats 2,1]

``_startup`` and ``load_model`` come from ``TREE/benchmarks/bench_ray.py``
(what a start is: see its docstring); warm and cold starts are interleaved,
each in a fresh worker process; medians printed with the load average (and
the CPU time of the start, where the tree's ``_startup`` measures it).
``--real-weights``: the models with stored He-initialized weights (as a real
model file holds them) instead of the ``light`` files' ConstantOfShape fills,
which a cold build generates instead of parsing.  Workers get a user's
byte-code cache as in ``bench_ray.py`` (``--keep-env`` turns this off), and
one untimed start of each kind precedes the timed ones.  ``--numpy-formats
2,1``: NumPy sessions shipped with their partitions in each stored format
in turn (2: the graph as data; 1: the ONNX model, as before format 2),
one row each (trees without format 2 ship what they write).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--models", default="squeezenet,resnet50")
    p.add_argument("--backends", default="onnxruntime,numpy")
    p.add_argument("--starts", type=int, default=5)
    p.add_argument("--real-weights", action="store_true")
    p.add_argument("--keep-env", action="store_true", help="run the Ray workers with this environment as is")
    p.add_argument("--numpy-formats", default="2")
    args = p.parse_args(argv)
    sys.path.insert(0, os.path.join(args.tree, "benchmarks"))
    import bench_ray
    import ray
    import ray.cloudpickle

    from nnrt_core import ScheduleConfig
    from nnrt_ray import ship

    ray.cloudpickle.register_pickle_by_value(bench_ray)  # workers need not see the tree's benchmarks folder
    if hasattr(bench_ray, "user_bytecode_env"):  # trees older than it: their environment as is
        bench_ray.user_bytecode_env(args.keep_env)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    start = ray.remote(num_cpus=1, max_calls=1)(bench_ray._startup)
    try:
        for backend in args.backends.split(","):
            cfg = ScheduleConfig(backends=[backend], backup="numpy", num_threads=1)
            formats = args.numpy_formats.split(",") if backend == "numpy" else [""]
            for name, fmt in [(n, f) for n in args.models.split(",") for f in formats]:
                load0 = os.getloadavg()[0]
                model = bench_ray.load_model(name, args.real_weights)
                with _numpy_format(fmt):
                    warm, cold = ship(model, cfg), ship(model, cfg, warm=False)
                ray.get([start.remote(warm, cfg), start.remote(cold, cfg)])  # untimed: byte-code written
                w, c = [], []
                for _ in range(args.starts):
                    w.append(ray.get(start.remote(warm, cfg)))
                    c.append(ray.get(start.remote(cold, cfg)))
                mw, mc = statistics.median(_wall(w)), statistics.median(_wall(c))
                cpu = ""
                if all(isinstance(x, tuple) for x in w + c):  # trees whose _startup returns CPU time too
                    cw, cc = statistics.median(x[1] for x in w), statistics.median(x[1] for x in c)
                    cpu = f"  CPU {cw * 1e3:6.1f} / {cc * 1e3:6.1f} ms = {cw / cc:.3f}"
                kind = backend + (f" f{fmt}" if fmt else "")
                print(f"{name:10s} {kind:11s} warm {mw * 1e3:7.1f} ms  cold {mc * 1e3:7.1f} ms  warm/cold "
                      f"{mw / mc:.3f}{cpu}  (load average {load0:.1f} -> {os.getloadavg()[0]:.1f}; file "
                      f"{warm.file_bytes / 1e6:.1f} MB)", flush=True)
    finally:
        ray.shutdown()
    return 0


@contextlib.contextmanager
def _numpy_format(fmt: str):
    """NumPy partitions stored in format ``fmt`` while shipping ("1": the ONNX
    form; trees without format 2 write what they write)."""
    import nnrt_numpy.backend as numpy_backend
    import nnrt_numpy.stored as stored

    # trees up to session 9 bound ``pack`` in the backend module at import; later ones import it on use
    owners = [m for m in (numpy_backend, stored) if hasattr(m, "pack")]
    before = [m.pack for m in owners]
    if fmt == "1" and hasattr(stored, "pack_onnx"):
        for m in owners:
            m.pack = stored.pack_onnx
    try:
        yield
    finally:
        for m, f in zip(owners, before):
            m.pack = f


def _wall(starts: list) -> list[float]:
    """Wall seconds of each start (a tree's ``_startup`` returns them alone or with CPU seconds)."""
    return [x[0] if isinstance(x, tuple) else x for x in starts]


if __name__ == "__main__":
    sys.exit(main())
