"""Where nnrt serve's event loop spends its CPU under concurrent clients (cProfile in the server process).

    python benchmarks/profile_serve.py [--model squeezenet|KEY] [--models-dir DIR] [--served m_batch|m_nobatch]
                                       [--clients 16] [--seconds 8] [--instances 2] [--protocol http|grpc]
                                       [--top 30] [--out FILE.prof]

The server of ``bench_serve.py`` (same repository: ``m_nobatch``, ``m_batch``,
...) runs under ``python -m cProfile`` in a child process; ``--clients``
closed-loop clients load ``--served`` for ``--seconds`` (HTTP: the raw
clients of ``bench_serve.py``; gRPC: tritonclient.grpc, in a child process,
as its protobuf names clash with the server's).  cProfile sees the main
thread only, which is the event loop (HTTP, gRPC, decode, queue, encode,
metrics); the runs are on other threads.  Printed: requests/s, the loop's
CPU per request (``/proc``), and the top functions by own time and by
cumulative time, per request.
"""
from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import hammer, load_model, make_repository, server_cpu  # noqa: E402

#: the server's main, under cProfile timed by the main thread's own CPU clock (not wall time: on a busy
#: machine a wall-clock profile charges preemption and GIL waits to whatever function was running)
PROFILED = """
import cProfile, sys, time
out = sys.argv.pop(1)
from nnrt_serve.cli import main
prof = cProfile.Profile(time.thread_time)
try:
    prof.runcall(main, sys.argv[1:])
finally:
    prof.dump_stats(out)
"""

GRPC_CLIENTS = """
import sys, threading, time, numpy as np
import tritonclient.grpc as grpcclient
address, model, clients, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
feeds = dict(np.load(sys.argv[5]))
count, stop = [0] * clients, threading.Event()
def loop(i):
    c = grpcclient.InferenceServerClient(address)
    inputs = []
    for k, v in feeds.items():
        t = grpcclient.InferInput(k, list(v.shape), {"float32": "FP32", "int64": "INT64", "int32": "INT32"}[str(v.dtype)])
        t.set_data_from_numpy(v)
        inputs.append(t)
    while not stop.is_set():
        c.infer(model, inputs)
        count[i] += 1
    c.close()
ts = [threading.Thread(target=loop, args=(i,)) for i in range(clients)]
[t.start() for t in ts]
time.sleep(seconds)
stop.set()
[t.join() for t in ts]
print(sum(count))
"""


def _grpc_load(server, model: str, feeds: dict, clients: int, seconds: float, folder: Path) -> int:
    import numpy as np
    path = folder / "feeds.npz"
    np.savez(path, **feeds)
    out = subprocess.run([sys.executable, "-c", GRPC_CLIENTS, server.grpc_address, model, str(clients),
                          str(seconds), str(path)], capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return int(out.stdout.split()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--served", default="m_batch")
    ap.add_argument("--backends", default="onnxruntime")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--protocol", choices=("http", "grpc"), default="http")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", default=None, help="keep the profile here")
    ap.add_argument("--no-profile", action="store_true", help="only the CPU per request, no profiler")
    ap.add_argument("--server-args", default="", help="more nnrt serve arguments, e.g. '--loop asyncio'")
    args = ap.parse_args()
    import real_models
    from nnrt_serve.process import ServerProcess

    sm = load_model(args.model, real_models.models_dir(args.models_dir))
    with tempfile.TemporaryDirectory(prefix="nnrt-prof-serve-") as d:
        repo = make_repository(Path(d) / "models", sm, args.backends, args.instances)
        out = args.out or str(Path(d) / "serve.prof")
        server = ServerProcess(repo, exit_after=args.seconds + 300, extra_args=args.server_args.split())
        if not args.no_profile:
            server.args[1:3] = ["-c", PROFILED, out]  # instead of "-m nnrt_serve"
        with server:
            want = sm.feeds
            from nnrt_core import ScheduleConfig, Session
            want = Session(repo / "m_nobatch" / "model.onnx", ScheduleConfig(backends=args.backends.split(","))).run(
                sm.feeds)
            hammer(server, args.served, sm, want, args.clients, 1.5, 10_000)  # warm-up
            (l0, r0), t0 = server_cpu(server.pid), time.monotonic()
            if args.protocol == "http":
                n = hammer(server, args.served, sm, want, args.clients, args.seconds).requests
            else:
                n = _grpc_load(server, args.served, sm.feeds, args.clients, args.seconds, Path(d))
            wall, (l1, r1) = time.monotonic() - t0, server_cpu(server.pid)
        print(f"{args.protocol}, {args.served} ({sm.key}), {args.clients} clients, {args.server_args or 'defaults'}"
              f"{'' if args.no_profile else ', profiled'}: {n / wall:.0f} req/s, loop {1e3 * (l1 - l0) / n:.3f} ms CPU/request, runs {1e3 * (r1 - r0) / n:.3f}; "
              f"load average {os.getloadavg()[0]:.1f}")
        if args.no_profile:
            return 0
        stats = pstats.Stats(out)
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
