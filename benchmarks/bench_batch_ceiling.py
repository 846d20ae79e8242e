"""The most any batching server can gain on this machine: in-process stacking and the clients' own CPU.

    python benchmarks/bench_batch_ceiling.py [--models squeezenet,minilm_int8,ppocr_v6_rec_tiny] [--models-dir DIR]
                                             [--backends onnxruntime] [--instances 2] [--sizes 1,2,4,8,16]
                                             [--rounds 5] [--seconds 1.0] [--clients 16] [--client-seconds 4]
                                             [--loop-ms 0.58] [--json]

Issue #34 asks for "throughput at 16 concurrent clients with dynamic batching
>= 1.5x without it".  On a machine where the clients, the server's event
loop and the runs share the same cores, that ratio is bounded by CPU, not by
the batching policy.  This script measures the parts of that bound:

1. **Stacking, in process.**  Each model (``bench_serve.py``'s models: the
   light SqueezeNet with its batch dimension freed, or a real model of
   ``real_models.py`` with a free batch dimension) is built once as
   ``nnrt serve`` builds it: ``--backends``, ``num_threads = cores //
   instances`` (``nnrt_serve.settings.split_cores``).  For each batch size
   of ``--sizes``, ``--instances`` threads run ``Session.run`` on stacked
   feeds of that many rows back to back for ``--seconds`` (the server's
   instances, all busy: the best case of a batching server); the sizes are
   interleaved over ``--rounds`` rounds, in alternating order.  Reported:
   rows/s (median), the CPU seconds of this process per row (every thread:
   the runs and their engine's pools), and each size's rows/s over batch 1's
   (what stacking itself gains).
2. **The clients' CPU.**  ``--clients`` closed-loop clients exactly as
   ``bench_serve.py --client raw`` sends them (a keep-alive connection each,
   the binary request tritonclient.http makes for the model, answers of the
   model's response size) against a *trivial* Starlette/uvicorn server that
   reads the body and answers fixed bytes, in a child process.  Reported:
   requests/s, the clients' CPU ms per request (this process) and the trivial
   server's (the HTTP stack's floor: no decode, no queue, no run).
3. **The ceiling.**  Where the clients, the server loop and the runs are all
   CPU-bound on the same cores, requests/s ~ cores / (client + loop + run
   CPU per request), so the batched / unbatched ratio is at most
   ``(c + l + r(1)) / (c + l + r(B))`` with ``r(B)`` the CPU per row at batch
   ``B``.  Reported with ``l`` = the trivial server's floor (optimistic: no
   server does less) and with ``l`` = ``--loop-ms`` (nnrt serve's event loop
   CPU per request as ``bench_serve.py`` measured it), for every batch size.

The load average is printed at the start and the end: the in-process rows/s
move with it; the CPU per row and per request move less.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import CORES, ServeModel, load_model, own_cpu, server_cpu  # noqa: E402

TRIVIAL = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
size, header = int(sys.argv[1]), sys.argv[2]
body = b"\\0" * size
async def infer(request):
    await request.body()
    return Response(body, media_type="application/octet-stream", headers={"Inference-Header-Content-Length": header})
uvicorn.run(Starlette(routes=[Route("/v2/models/m/infer", infer, methods=["POST"])]), host="127.0.0.1",
            port=int(sys.argv[3]), log_level="warning", access_log=False, lifespan="off")
"""


# ----------------------------------------------------------------------------- 1. stacking
def build_session(sm: ServeModel, backends: str, instances: int, folder: Path):
    """The batching model as ``nnrt serve`` builds it for ``instances`` instances."""
    from nnrt_core import ScheduleConfig, Session
    from nnrt_serve.settings import ServingSettings, split_cores

    path = folder / f"{sm.key}.onnx"
    onnx.save(sm.batched, str(path))
    settings = ServingSettings(max_batch_size=16, instances=instances)
    config = split_cores(ScheduleConfig(backends=backends.split(",")), settings)
    return Session(path, config), config.num_threads


def _window(sess, feeds: dict[str, np.ndarray], rows: int, instances: int, seconds: float) -> tuple[float, float]:
    """(rows/s, CPU s per row) of ``instances`` threads running ``feeds`` back to back for ``seconds``."""
    stop = threading.Event()
    done = [0] * instances

    def loop(i: int) -> None:
        while not stop.is_set():
            sess.run(feeds)
            done[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(instances)]
    c0, t0 = own_cpu(), time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, own_cpu() - c0
    total = sum(done) * rows
    return total / wall, cpu / max(total, 1)


def stacking(sess, sm: ServeModel, instances: int, sizes: list[int], rounds: int, seconds: float) -> dict:
    """Rows/s and CPU per row of every batch size (medians of interleaved rounds)."""
    feeds = {n: {k: np.ascontiguousarray(np.repeat(v, n, axis=0)) for k, v in sm.feeds.items()} for n in sizes}
    for n in sizes:  # warm-up: every signature once
        sess.run(feeds[n])
    rps: dict[int, list[float]] = {n: [] for n in sizes}
    cpu: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(rounds):
        for n in (sizes if r % 2 == 0 else sizes[::-1]):
            time.sleep(0.05)
            a, b = _window(sess, feeds[n], n, instances, seconds)
            rps[n].append(a)
            cpu[n].append(b)
    med_rps = {n: statistics.median(v) for n, v in rps.items()}
    med_cpu = {n: 1e3 * statistics.median(v) for n, v in cpu.items()}
    base = sizes[0]
    return {"rows_per_s": med_rps, "cpu_ms_per_row": med_cpu,
            "gain": {n: med_rps[n] / med_rps[base] for n in sizes},
            "cpu_gain": {n: med_cpu[base] / med_cpu[n] for n in sizes}}


# ----------------------------------------------------------------------------- 2. clients
def _wait(address: str, path: str, body: bytes) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = http.client.HTTPConnection(address, timeout=10)
            conn.request("POST", path, body)
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def client_cpu(sm: ServeModel, response_bytes: int, clients: int, seconds: float) -> dict:
    """``clients`` raw closed-loop clients against a trivial server answering ``response_bytes``."""
    body, header_len = sm.request_body()
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", TRIVIAL, str(response_bytes), "200", str(port)])
    address, path = f"127.0.0.1:{port}", "/v2/models/m/infer"
    headers = {"Inference-Header-Content-Length": str(header_len), "Content-Type": "application/octet-stream"}
    try:
        _wait(address, path, body)
        stop, count = threading.Event(), [0] * clients

        def loop(i: int) -> None:
            conn = http.client.HTTPConnection(address, timeout=60)
            while not stop.is_set():
                conn.request("POST", path, body, headers)
                r = conn.getresponse()
                data = r.read()
                if r.status != 200 or len(data) != response_bytes:
                    raise RuntimeError(f"trivial server answered {r.status}, {len(data)} bytes")
                count[i] += 1
            conn.close()

        threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(clients)]
        c0, s0, t0 = own_cpu(), sum(server_cpu(proc.pid)), time.monotonic()
        for t in threads:
            t.start()
        stop.wait(seconds)
        stop.set()
        for t in threads:
            t.join(60)
        wall, n = time.monotonic() - t0, max(sum(count), 1)
        c1, s1 = own_cpu(), sum(server_cpu(proc.pid))
    finally:
        proc.terminate()
        proc.wait(10)
    return {"requests_per_s": n / wall, "client_ms": 1e3 * (c1 - c0) / n, "trivial_server_ms": 1e3 * (s1 - s0) / n,
            "request_bytes": len(body), "response_bytes": response_bytes}


# ----------------------------------------------------------------------------- 3. ceiling
def ceiling(stack: dict, clients: dict, loop_ms: float) -> dict:
    """The batched / unbatched requests/s bound of a CPU-bound machine, per batch size."""
    r = stack["cpu_ms_per_row"]
    base = min(r)
    out = {}
    for label, l in (("trivial_loop", clients["trivial_server_ms"]), ("nnrt_loop", loop_ms)):
        c = clients["client_ms"]
        out[label] = {n: (c + l + r[base]) / (c + l + r[n]) for n in r}
    return out


def measure(key: str, args: argparse.Namespace, folder: Path) -> dict:
    import real_models

    sm = load_model(key, real_models.models_dir(args.models_dir))
    sess, threads = build_session(sm, args.backends, args.instances, folder)
    sizes = [int(s) for s in args.sizes.split(",")]
    stack = stacking(sess, sm, args.instances, sizes, args.rounds, args.seconds)
    outputs = sess.run(sm.feeds)
    response = sum(np.asarray(v).nbytes for v in outputs.values()) + 200  # the outputs and a JSON header
    clients = client_cpu(sm, response, args.clients, args.client_seconds)
    return {"model": key, "threads_per_run": threads, "instances": args.instances, "stacking": stack,
            "clients": clients, "ceiling": ceiling(stack, clients, args.loop_ms)}


def print_model(m: dict, loop_ms: float) -> None:
    s, c = m["stacking"], m["clients"]
    print(f"{m['model']}: {m['instances']} instances x {m['threads_per_run']} thread(s), in process")
    for n in s["rows_per_s"]:
        print(f"  batch {n:>2}: {s['rows_per_s'][n]:8.1f} rows/s ({s['gain'][n]:.2f}x batch 1), "
              f"CPU {s['cpu_ms_per_row'][n]:.2f} ms/row ({s['cpu_gain'][n]:.2f}x less)")
    print(f"  {c['request_bytes']} B request / {c['response_bytes']} B answer, clients alone against a trivial "
          f"server: {c['requests_per_s']:.0f} req/s, clients {c['client_ms']:.3f} ms CPU/request, trivial "
          f"server {c['trivial_server_ms']:.3f} ms CPU/request")
    for label, text in (("trivial_loop", f"server loop = trivial server {c['trivial_server_ms']:.2f} ms"),
                        ("nnrt_loop", f"server loop = nnrt serve's {loop_ms:.2f} ms")):
        bound = m["ceiling"][label]
        print(f"  ceiling batched/unbatched ({text}): "
              + ", ".join(f"B={n}: {v:.2f}x" for n, v in bound.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="squeezenet,minilm_int8,ppocr_v6_rec_tiny")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--backends", default="onnxruntime")
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--sizes", default="1,2,4,8,16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="of each in-process window")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--client-seconds", type=float, default=4)
    ap.add_argument("--loop-ms", type=float, default=0.58, help="nnrt serve's event-loop CPU per request "
                    "(bench_serve.py's 'server loop' figure) for the second ceiling")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report = {"cores": CORES, "load_average": os.getloadavg(), "models": []}
    with tempfile.TemporaryDirectory(prefix="nnrt-ceiling-") as d:
        for key in args.models.split(","):
            report["models"].append(measure(key, args, Path(d)))
    report["load_average_end"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{CORES} cores; load average {report['load_average'][0]:.1f} -> {report['load_average_end'][0]:.1f}")
    for m in report["models"]:
        print_model(m, args.loop_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
