"""nnrt serve on loopback: request latency, dynamic batching throughput, load held.

    python benchmarks/bench_serve.py [--backends onnxruntime] [--runs 30] [--clients 16] [--seconds 8]
                                     [--rounds 2] [--instances 2] [--load-clients 16] [--load-seconds 20]
                                     [--parts latency,throughput,load] [--json]

Every server is ``nnrt serve`` in a child process on 127.0.0.1 (free ports,
``--exit-after`` bounded); every client is in this process.  The model is the
onnx wheel's light SqueezeNet with informative random weights
(examples/light_weights.py), with its batch dimension freed for the batching
runs.  Nothing leaves 127.0.0.1.

1. **Latency, batch 1, HTTP + binary tensors** (tritonclient.http, one
   client), interleaved with, per round, an in-process ``Session.run`` of
   the same file and config, and the *raw transport* of the same bytes: an
   HTTP POST of the request's bytes (the binary request body tritonclient
   sends) to a bare Starlette/uvicorn echo route answering with as many bytes
   as the response, over a keep-alive geventhttpclient connection (the
   client library tritonclient.http uses).  Reported: medians of ``--runs``,
   and ``serve / (run + transport)``; target <= 1.3.
2. **Throughput, ``--clients`` concurrent clients** (each a thread with its
   own tritonclient.http client, requests back to back) for ``--seconds``,
   on the model without dynamic batching and with it (``max_batch_size =
   16``, ``max_queue_delay_ms = 4``), both with ``--instances`` executions at
   once, ``--rounds`` interleaved rounds each; reported: requests/s, the
   median ratio batched / unbatched (target >= 1.5), the rows per execution,
   and what stacking gains in-process: ``Session.run``'s time per image at
   batch 1 over batch 16 (the ceiling of the ratio for a compute-bound model).
3. **Load held**: ``--load-clients`` clients for ``--load-seconds``, each
   request drawn at random: 60 % good (binary), the rest one of: wrong
   datatype, wrong shape, missing input, unknown model, malformed JSON, a
   binary payload whose size does not match its shape.  Every request has a
   30 s client timeout (a timeout counts as a hang, a connection the server
   closed without an answer as dropped); every good answer must
   be 200 with the right shape, every bad one a 4xx whose message names the
   tensor (or the model / JSON).  Reported: counts, hangs, server alive, the
   server's RSS after the first quarter (warm) and at the end.
4. **Ray Serve** (``--parts ray``, not run by default; needs plugins/serve[ray]):
   ``nnrt serve --ray --replicas 2``; ``--ray-clients`` clients for
   ``--ray-seconds``; a third of the way in, one replica's process is
   SIGKILLed.  Reported: answers (ok / error), hangs (30 s timeouts), how
   long until 2 replicas serve again.
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
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from light_weights import he_initialized  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
SHAPE = (1, 3, 224, 224)


def free_batch(m: onnx.ModelProto) -> onnx.ModelProto:
    for v in [*m.graph.input, *m.graph.output]:
        d = v.type.tensor_type.shape.dim
        d[0].ClearField("dim_value")
        d[0].dim_param = "N"
    del m.graph.value_info[:]
    return m


def make_repository(root: Path, backends: str, instances: int) -> Path:
    config = f"backends = {json.dumps(backends.split(','))}\n"
    models = {"sq": (False, ""), "sq_nobatch": (True, f"instances = {instances}\n"),
              "sq_batch": (True, f"max_batch_size = 16\nmax_queue_delay_ms = 4\ninstances = {instances}\n")}
    for name, (free, extra) in models.items():
        (root / name).mkdir(parents=True)
        m = he_initialized(onnx.load(str(LIGHT)), seed=1)
        onnx.save(free_batch(m) if free else m, str(root / name / "model.onnx"))
        (root / name / "nnrt.toml").write_text(config + extra)
    return root


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


def latency(server, repo: Path, backends: str, runs: int) -> dict:
    import tritonclient.http as httpclient
    from geventhttpclient import HTTPClient

    from nnrt_core import ScheduleConfig, Session

    sess = Session(repo / "sq" / "model.onnx", ScheduleConfig(backends=backends.split(",")))
    x = np.random.RandomState(0).rand(*SHAPE).astype(np.float32)
    want = sess.run({"data_0": x})["softmaxout_1"]
    client = httpclient.InferenceServerClient(server.http_address)
    body, header_len = httpclient.InferenceServerClient.generate_request_body([triton_input(x)])
    out_bytes = want.nbytes + 200  # the output tensor and its JSON header
    port = free_port()
    echo = subprocess.Popen([sys.executable, "-c", ECHO, str(out_bytes), str(port)])
    try:
        raw = HTTPClient("127.0.0.1", port, connection_timeout=30, network_timeout=30)
        _wait_echo(raw)
        steps = {"run": lambda: sess.run({"data_0": x}),
                 "transport": lambda: raw.post("/echo", body=body, headers={
                     "Inference-Header-Content-Length": str(header_len)}).read(),
                 "serve": lambda: client.infer("sq", [triton_input(x)]).as_numpy("softmaxout_1")}
        samples: dict[str, list[float]] = {k: [] for k in steps}
        order = list(steps)
        for i in range(runs + 3):
            for k in order[i % 3:] + order[:i % 3]:  # each kind first, second and third equally often
                time.sleep(0.02)  # ONNX Runtime's pool spins a while after a run: let it settle
                t0 = time.perf_counter()
                out = steps[k]()
                if i >= 3:  # warm-up rounds are not counted
                    samples[k].append(time.perf_counter() - t0)
                if k == "serve":
                    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7)
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
def _hammer(server, model: str, clients: int, seconds: float, max_requests: int) -> float:
    import tritonclient.http as httpclient

    x = np.random.RandomState(1).rand(*SHAPE).astype(np.float32)
    counts, errors = [0] * clients, []
    stop_at = time.monotonic() + seconds

    def client_loop(i: int) -> None:
        c = httpclient.InferenceServerClient(server.http_address, network_timeout=60)
        try:
            while time.monotonic() < stop_at and sum(counts) < max_requests:
                c.infer(model, [triton_input(x)])
                counts[i] += 1
        except Exception as e:  # reported, never hidden
            errors.append(repr(e))
        finally:
            c.close()

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    if errors:
        raise RuntimeError(f"{model}: {len(errors)} client errors, e.g. {errors[0]}")
    return sum(counts) / (time.monotonic() - t0)


def throughput(server, clients: int, seconds: float, rounds: int) -> dict:
    _hammer(server, "sq_batch", clients, 2, 10_000)  # warm-up: batch sizes seen once
    _hammer(server, "sq_nobatch", clients, 1, 10_000)
    rows = {"nobatch": [], "batch": []}
    for r in range(rounds):
        order = ("nobatch", "batch") if r % 2 == 0 else ("batch", "nobatch")
        for kind in order:
            rows[kind].append(_hammer(server, f"sq_{kind}", clients, seconds, 100_000))
    ratios = [b / n for b, n in zip(rows["batch"], rows["nobatch"])]
    text = _metrics(server)
    rows_sum = _metric(text, 'nnrt_serve_batch_rows_sum{model="sq_batch"}')
    runs = _metric(text, 'nnrt_serve_batch_rows_count{model="sq_batch"}')
    return {"clients": clients, "seconds": seconds, "rounds": rounds, "rows_per_execution": rows_sum / max(runs, 1),
            "nobatch_rps": rows["nobatch"], "batch_rps": rows["batch"], "ratio": statistics.median(ratios)}


def batch_gain(repo: Path, backends: str, rounds: int = 5) -> float:
    """In-process: time per image of a batch-1 run over that of a batch-16 run (medians, interleaved)."""
    from nnrt_core import ScheduleConfig, Session

    sess = Session(repo / "sq_batch" / "model.onnx", ScheduleConfig(backends=backends.split(",")))
    feeds = {n: {"data_0": np.random.RandomState(n).rand(n, *SHAPE[1:]).astype(np.float32)} for n in (1, 16)}
    per_image: dict[int, list[float]] = {1: [], 16: []}
    for r in range(rounds + 1):
        for n in ((1, 16) if r % 2 == 0 else (16, 1)):
            time.sleep(0.02)
            t0 = time.perf_counter()
            sess.run(feeds[n])
            if r:
                per_image[n].append((time.perf_counter() - t0) / n)
    return statistics.median(per_image[1]) / statistics.median(per_image[16])


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
        "dtype": ("sq_batch", *binary({**good, "datatype": "FP64", "parameters": {"binary_data_size": len(raw) * 2}},
                                      x.astype(np.float64).tobytes()), ["'data_0'", "FP64", "FP32"]),
        "shape": ("sq_batch", *binary({**good, "shape": [1, 3, 224, 223], "parameters": {
            "binary_data_size": 3 * 224 * 223 * 4}}, raw[:3 * 224 * 223 * 4]), ["'data_0'", "223"]),
        "missing": ("sq_batch", json.dumps({"inputs": [{"name": "other", "datatype": "FP32", "shape": [1],
                                                        "data": [0]}]}).encode(), {}, ["'other'", "data_0"]),
        "model": ("nope", b"{}", {}, ["nope"]),
        "json": ("sq_batch", b'{"inputs": [', {}, ["JSON"]),
        "size": ("sq_batch", *binary({**good, "parameters": {"binary_data_size": len(raw) - 4}}, raw[:-4]),
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
            out = c.infer("sq_batch", [triton_input(x)]).as_numpy("softmaxout_1")
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
                    c.infer("sq_batch", [triton_input(x)])
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
    ap.add_argument("--backends", default="onnxruntime")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--load-clients", type=int, default=16)
    ap.add_argument("--load-seconds", type=float, default=20)
    ap.add_argument("--instances", type=int, default=2, help="instances of both throughput models (default 2)")
    ap.add_argument("--ray-clients", type=int, default=8)
    ap.add_argument("--ray-seconds", type=float, default=30)
    ap.add_argument("--parts", default="latency,throughput,load", help="any of latency,throughput,load,ray")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    from nnrt_serve.process import ServerProcess

    budget = 120 + args.runs + 2 * args.rounds * args.seconds + args.load_seconds * 2 + 60
    with tempfile.TemporaryDirectory(prefix="nnrt-bench-serve-") as d:
        repo = make_repository(Path(d) / "models", args.backends, args.instances)
        with ServerProcess(repo, exit_after=budget, extra_args=["--grpc-port", "off"]) as server:
            report = {"load_average": os.getloadavg(), "backends": args.backends,
                      "instances": args.instances}
            if "latency" in parts:
                report["latency"] = latency(server, repo, args.backends, args.runs)
            if "throughput" in parts:
                report["throughput"] = throughput(server, args.clients, args.seconds, args.rounds)
                report["throughput"]["in_process_batch16_gain"] = batch_gain(repo, args.backends)
            if "load" in parts:
                report["load"] = load_held(server, args.load_clients, args.load_seconds)
        if "ray" in parts:
            report["ray"] = ray_kill(repo, args.ray_clients, args.ray_seconds)
    report["load_average_end"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"load average {report['load_average'][0]:.1f} -> {report['load_average_end'][0]:.1f}; "
          f"backends {args.backends}")
    if "latency" in report:
        lat = report["latency"]
        print(f"latency (median of {lat['runs']}): Session.run {lat['run_ms']:.2f} ms, raw transport of "
              f"{lat['request_bytes']} B + {lat['response_bytes']} B {lat['transport_ms']:.2f} ms, nnrt serve HTTP "
              f"binary {lat['serve_ms']:.2f} ms -> {lat['ratio']:.2f}x (target <= 1.3)")
    if "throughput" in report:
        thr = report["throughput"]
        print(f"throughput, {thr['clients']} clients: without batching {[round(v, 1) for v in thr['nobatch_rps']]} "
              f"req/s, with {[round(v, 1) for v in thr['batch_rps']]} req/s -> "
              f"{thr['ratio']:.2f}x (target >= 1.5); rows per execution {thr['rows_per_execution']:.1f}; instances "
              f"{args.instances}; in-process Session.run, time per image batch 1 / batch 16: "
              f"{thr['in_process_batch16_gain']:.2f}x (what stacking itself gains)")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
