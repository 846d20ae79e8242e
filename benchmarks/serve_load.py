"""What bench_serve.py serves and how its throughput clients load it.

* :class:`ServeModel`: the model under test (SqueezeNet by default, or a real
  model of ``real_models.py`` with a free batch dimension) and its batch-1
  request.
* :func:`hammer`: ``clients`` threads sending requests back to back for a
  bounded time, each over its own keep-alive connection, with the *same
  bytes* tritonclient.http sends (its binary tensor request body, made once
  per client with ``InferenceServerClient.generate_request_body``: what a
  load generator such as perf_analyzer does), or through tritonclient.http
  itself (``client="tritonclient"``: its per-request Python work on top).
  Every client checks its first answer against ``Session.run``'s outputs,
  every other answer's status and size.  It reports requests/s and where the
  CPU went: the clients (this process), the server's event loop (its main
  thread: HTTP, decode, queue, encode, metrics) and its other threads (the
  runs: ``Session.run``, ONNX Runtime's threads), per request and as a share
  of the machine.
"""
from __future__ import annotations

import http.client
import json
import os
import resource
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from light_weights import he_initialized  # noqa: E402

__all__ = ["ServeModel", "squeezenet", "real_model", "load_model", "make_repository", "hammer", "HammerResult",
           "server_cpu", "own_cpu", "CORES"]

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
CORES = os.cpu_count() or 1


@dataclass
class ServeModel:
    """A model file and its batch-1 request."""

    key: str
    onnx_model: onnx.ModelProto  #: as served without batching; ``batched`` frees its batch dimension
    batched: onnx.ModelProto
    feeds: dict[str, np.ndarray]  #: batch 1

    def triton_inputs(self) -> list[Any]:
        import tritonclient.http as httpclient
        from tritonclient.utils import np_to_triton_dtype

        out = []
        for name, x in self.feeds.items():
            i = httpclient.InferInput(name, list(x.shape), np_to_triton_dtype(x.dtype))
            i.set_data_from_numpy(x, binary_data=True)
            out.append(i)
        return out

    def request_body(self) -> tuple[bytes, int]:
        """(body, JSON header length) of the binary request tritonclient.http sends for :attr:`feeds`."""
        import tritonclient.http as httpclient
        return httpclient.InferenceServerClient.generate_request_body(self.triton_inputs())


def free_batch(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` with the first dimension of every input and output free (``N``)."""
    m = onnx.ModelProto.FromString(m.SerializeToString())
    for v in [*m.graph.input, *m.graph.output]:
        d = v.type.tensor_type.shape.dim
        d[0].ClearField("dim_value")
        d[0].dim_param = "N"
    del m.graph.value_info[:]
    return m


def squeezenet() -> ServeModel:
    """The onnx wheel's light SqueezeNet with informative random weights (static batch 1, and freed)."""
    m = he_initialized(onnx.load(str(LIGHT)), seed=1)
    x = np.random.RandomState(0).rand(1, 3, 224, 224).astype(np.float32)
    return ServeModel("squeezenet", m, free_batch(m), {"data_0": x})


def real_model(key: str, models_dir: Path) -> ServeModel:
    """A model of ``real_models.SPECS`` (it must already have a free batch dimension) with its first step's feeds."""
    import real_models

    found = real_models.model_feeds(key, models_dir)
    if found is None:
        raise SystemExit(f"model {key!r} is not under {models_dir}: run benchmarks/real_models.py --download "
                         "(or bench_serve.py --download)")
    path, feeds = found
    m = onnx.load(str(path))
    first = {x.name: x for x in m.graph.input}
    fixed = [n for n in feeds if first[n].type.tensor_type.shape.dim[0].HasField("dim_value")]
    if fixed:
        raise SystemExit(f"model {key!r}: inputs {fixed} have a fixed first dimension; dynamic batching needs a "
                         "free one")
    return ServeModel(key, m, m, {k: np.ascontiguousarray(v) for k, v in feeds.items()})


def load_model(key: str, models_dir: Path) -> ServeModel:
    return squeezenet() if key == "squeezenet" else real_model(key, models_dir)


def make_repository(root: Path, model: ServeModel, backends: str, instances: int,
                    max_batch_size: int = 16, max_queue_delay_ms: float = 4) -> Path:
    """Four models: ``m`` (as shipped, one instance), ``m_nobatch``, ``m_batch`` (the default batching policy,
    ``fair_share``) and ``m_fill`` (``fair_share = false``: each batch fills up to ``max_batch_size`` or the
    delay), ``instances`` each."""
    config = f"backends = {json.dumps(backends.split(','))}\n"
    batching = f"max_batch_size = {max_batch_size}\nmax_queue_delay_ms = {max_queue_delay_ms}\ninstances = {instances}\n"
    models = {"m": (model.onnx_model, ""), "m_nobatch": (model.batched, f"instances = {instances}\n"),
              "m_batch": (model.batched, batching), "m_fill": (model.batched, batching + "fair_share = false\n")}
    for name, (m, extra) in models.items():
        (root / name).mkdir(parents=True)
        onnx.save(m, str(root / name / "model.onnx"))
        (root / name / "nnrt.toml").write_text(config + extra)
    return root


# ------------------------------------------------------------------------ CPU accounting
def server_cpu(pid: int) -> tuple[float, float]:
    """(CPU seconds of the server's main thread, of all its other threads) so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    main = other = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        cpu = (int(fields[11]) + int(fields[12])) / tick
        if int(task.name) == pid:
            main = cpu
        else:
            other += cpu
    return main, other


def own_cpu() -> float:
    """CPU seconds (user + system) this process has used so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class HammerResult:
    requests: int
    seconds: float
    client_cpu: float  #: CPU seconds of this process (the clients)
    loop_cpu: float  #: the server's main thread (event loop)
    run_cpu: float  #: the server's other threads (runs)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def per_request_ms(self) -> dict[str, float]:
        n = max(self.requests, 1)
        return {"clients": 1e3 * self.client_cpu / n, "server_loop": 1e3 * self.loop_cpu / n,
                "server_runs": 1e3 * self.run_cpu / n}

    def machine_share(self) -> dict[str, float]:
        """Each part's CPU as a fraction of the whole machine (all cores) over the run."""
        whole = self.seconds * CORES
        return {"clients": self.client_cpu / whole, "server_loop": self.loop_cpu / whole,
                "server_runs": self.run_cpu / whole}

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "seconds": self.seconds, "rps": self.rps,
                "cpu_ms_per_request": self.per_request_ms(), "machine_share": self.machine_share()}


def _check_answer(status: int, data: bytes, header_len: str | None, want: dict[str, np.ndarray], full: bool) -> None:
    if status != 200:
        raise RuntimeError(f"answer {status}: {data[:300]!r}")
    n = int(header_len) if header_len is not None else len(data)
    head = json.loads(data[:n]) if full else None
    if head is None:
        if len(data) - n != sum(w.nbytes for w in want.values()):
            raise RuntimeError(f"answer of {len(data)} bytes, not the outputs' size")
        return
    offset = n
    for o in head["outputs"]:
        size = o["parameters"]["binary_data_size"]
        got = np.frombuffer(data[offset:offset + size], dtype=want[o["name"]].dtype).reshape(o["shape"])
        offset += size
        np.testing.assert_allclose(got, want[o["name"]], rtol=1e-4, atol=1e-5 * float(np.abs(want[o["name"]]).max()))


def _raw_loop(address: str, path: str, body: bytes, header_len: int, want: dict[str, np.ndarray],
              stop: threading.Event, count: list[int], i: int, limit: int, total: list[int]) -> None:
    conn = http.client.HTTPConnection(address, timeout=60)
    headers = {"Inference-Header-Content-Length": str(header_len), "Content-Type": "application/octet-stream"}
    first = True
    try:
        while not stop.is_set() and sum(total) < limit:
            conn.request("POST", path, body, headers)
            r = conn.getresponse()
            data = r.read()
            _check_answer(r.status, data, r.getheader("Inference-Header-Content-Length"), want, first)
            first = False
            count[i] += 1
    finally:
        conn.close()


def _triton_loop(address: str, model: str, inputs_of, want: dict[str, np.ndarray], stop: threading.Event,
                 count: list[int], i: int, limit: int, total: list[int]) -> None:
    import tritonclient.http as httpclient

    c = httpclient.InferenceServerClient(address, network_timeout=60)
    try:
        while not stop.is_set() and sum(total) < limit:
            result = c.infer(model, inputs_of())
            if count[i] == 0:
                for name, w in want.items():
                    np.testing.assert_allclose(result.as_numpy(name), w, rtol=1e-4,
                                               atol=1e-5 * float(np.abs(w).max()))
            count[i] += 1
    finally:
        c.close()


def hammer(server: Any, model_name: str, sm: ServeModel, want: dict[str, np.ndarray], clients: int,
           seconds: float, max_requests: int = 100_000, client: str = "raw") -> HammerResult:
    """``clients`` closed-loop clients on ``model_name`` for ``seconds`` (or ``max_requests``)."""
    body, header_len = sm.request_body()
    count = [0] * clients
    errors: list[str] = []
    stop = threading.Event()

    def run(i: int) -> None:
        try:
            if client == "raw":
                _raw_loop(server.http_address, f"/v2/models/{model_name}/infer", body, header_len, want, stop,
                          count, i, max_requests, count)
            else:
                _triton_loop(server.http_address, model_name, sm.triton_inputs, want, stop, count, i,
                             max_requests, count)
        except Exception as e:  # reported, never hidden
            errors.append(f"{type(e).__name__}: {e}"[:300])

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    c0, (l0, r0), t0 = own_cpu(), server_cpu(server.pid), time.monotonic()
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(120)
    wall = time.monotonic() - t0
    c1, (l1, r1) = own_cpu(), server_cpu(server.pid)
    if errors or any(t.is_alive() for t in threads):
        raise RuntimeError(f"{model_name}: {len(errors)} client errors, {sum(t.is_alive() for t in threads)} "
                           f"stuck clients, e.g. {errors[:1]}")
    return HammerResult(sum(count), wall, c1 - c0, l1 - l0, r1 - r0)
