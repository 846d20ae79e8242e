"""nnrt serve over REST, driven by the real Triton client (tritonclient.http)
and by raw HTTP for the bad-input cases: a server on 127.0.0.1 (free port) in
a child process that stops by itself."""
from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("nnrt_serve")
httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

from serve_support import MAX_REQUEST_BYTES, make_repository, reference, start_server  # noqa: E402

RS = np.random.RandomState(7)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repository(tmp_path_factory.mktemp("serve") / "models")


@pytest.fixture(scope="module")
def server(repo):
    s = start_server(repo)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    c = httpclient.InferenceServerClient(server.http_address, concurrency=16, network_timeout=60)
    yield c
    c.close()


def image() -> np.ndarray:
    return RS.rand(1, 3, 224, 224).astype(np.float32)


def mlp_feeds(n: int = 3) -> dict[str, np.ndarray]:
    return {"x": RS.randn(n, 8).astype(np.float32), "offset": RS.randint(0, 3, (n, 1)).astype(np.int64)}


def triton_inputs(feeds: dict[str, np.ndarray], binary: bool = True) -> list:
    out = []
    for name, arr in feeds.items():
        i = httpclient.InferInput(name, list(arr.shape), "FP32" if arr.dtype == np.float32 else "INT64")
        i.set_data_from_numpy(arr, binary_data=binary)
        out.append(i)
    return out


def post(server, path: str, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(server.http_address, timeout=60)
    try:
        conn.request("POST", path, body, headers or {})
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    return r.status, json.loads(data)


def infer_json(server, model: str, inputs: list[dict], **extra) -> tuple[int, dict]:
    return post(server, f"/v2/models/{model}/infer", json.dumps({"inputs": inputs, **extra}).encode())


GOOD_OFFSET = {"name": "offset", "datatype": "INT64", "shape": [1, 1], "data": [1]}
GOOD_X = {"name": "x", "datatype": "FP32", "shape": [1, 8], "data": list(range(8))}


# ------------------------------------------------------------------ health and metadata
def test_server_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "nnrt" and "binary_tensor_data" in meta["extensions"]
    assert client.is_model_ready("mlp") and client.is_model_ready("mlp", "2")


def test_model_metadata_names_inputs_outputs_datatypes_shapes_versions(client):
    meta = client.get_model_metadata("mlp")
    assert meta["platform"] == "nnrt" and meta["versions"] == ["2"]
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 8]},
                              {"name": "offset", "datatype": "INT64", "shape": [-1, 1]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 4]},
                               {"name": "idx", "datatype": "INT64", "shape": [-1, 1]}]
    sq = client.get_model_metadata("squeezenet")
    assert sq["inputs"][0] == {"name": "data_0", "datatype": "FP32", "shape": [1, 3, 224, 224]}
    assert client.get_model_config("mlp")["max_batch_size"] == 16


# ----------------------------------------------------------------- same outputs as Session.run
@pytest.mark.parametrize("binary", [True, False])
def test_squeezenet_outputs_match_session_run(client, repo, binary):
    x = image()
    res = client.infer("squeezenet", triton_inputs({"data_0": x}, binary),
                       outputs=[httpclient.InferRequestedOutput("softmaxout_1", binary_data=binary)])
    want = reference(repo / "squeezenet" / "model.onnx", {"data_0": x})["softmaxout_1"]
    np.testing.assert_allclose(res.as_numpy("softmaxout_1"), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("binary", [True, False])
def test_mlp_outputs_ids_and_datatypes(client, repo, binary):
    feeds = mlp_feeds(3)
    res = client.infer("mlp", triton_inputs(feeds, binary), request_id=f"req-{binary}",
                       outputs=[httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("y", "idx")])
    want = reference(repo / "mlp" / "2" / "model.onnx", feeds)
    np.testing.assert_allclose(res.as_numpy("y"), want["y"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(res.as_numpy("idx"), want["idx"])
    assert res.as_numpy("idx").dtype == np.int64
    assert res.get_response()["id"] == f"req-{binary}"


def test_all_outputs_binary_by_default_and_gzip_request(client, repo):
    feeds = mlp_feeds(2)
    res = client.infer("mlp", triton_inputs(feeds), request_compression_algorithm="gzip")
    assert {o["name"] for o in res.get_response()["outputs"]} == {"y", "idx"}
    assert all("binary_data_size" in o["parameters"] for o in res.get_response()["outputs"])
    want = reference(repo / "mlp" / "2" / "model.onnx", feeds)
    np.testing.assert_allclose(res.as_numpy("y"), want["y"], rtol=1e-5, atol=1e-6)


def test_concurrent_requests_are_batched_and_split_back(client, server, repo):
    feeds = [mlp_feeds(n) for n in (1, 2, 3, 1, 4, 2, 1, 1, 3, 2, 1, 1)]
    pending = [client.async_infer("mlp", triton_inputs(f)) for f in feeds]
    results = [p.get_result() for p in pending]
    for f, r in zip(feeds, results):
        want = reference(repo / "mlp" / "2" / "model.onnx", f)
        np.testing.assert_allclose(r.as_numpy("y"), want["y"], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(r.as_numpy("idx"), want["idx"])
    sq = [image() for _ in range(6)]
    done = [client.async_infer("squeezenet_batch", triton_inputs({"data_0": x})) for x in sq]
    for x, p in zip(sq, done):
        want = reference(repo / "squeezenet_batch" / "model.onnx", {"data_0": x})["softmaxout_1"]
        np.testing.assert_allclose(p.get_result().as_numpy("softmaxout_1"), want, rtol=1e-4, atol=1e-6)
    text = metrics(server)
    rows = metric_value(text, 'nnrt_serve_batch_rows_sum{model="mlp"}')
    runs = metric_value(text, 'nnrt_serve_batch_rows_count{model="mlp"}')
    assert rows >= sum(next(iter(f.values())).shape[0] for f in feeds)
    assert runs < rows  # several requests shared executions


# -------------------------------------------------------------------------------- bad input
def test_unknown_model_and_version_are_404(server, client):
    status, body = infer_json(server, "nope", [GOOD_X, GOOD_OFFSET])
    assert status == 404 and "nope" in body["error"] and "mlp" in body["error"]
    status, body = post(server, "/v2/models/mlp/versions/7/infer", b"{}")
    assert status == 404 and "'7'" in body["error"] and "'2'" in body["error"]
    with pytest.raises(InferenceServerException, match="unknown model"):
        client.get_model_metadata("nope")


def test_the_connection_stays_usable_after_an_error_answer(server):
    conn = http.client.HTTPConnection(server.http_address, timeout=60)
    body = json.dumps({"inputs": [GOOD_X, GOOD_OFFSET]}).encode()
    for model, status in (("nope", 404), ("mlp", 200), ("mlp", 200)):
        conn.request("POST", f"/v2/models/{model}/infer", body if model == "mlp" else body + b" " * 4096)
        r = conn.getresponse()
        r.read()
        assert r.status == status and r.getheader("connection") != "close"
    conn.close()


@pytest.mark.parametrize("inputs, status, words", [
    ([GOOD_X], 400, ["missing", "offset"]),
    ([GOOD_X, GOOD_OFFSET, {"name": "z", "datatype": "FP32", "shape": [1], "data": [0]}], 400, ["unexpected", "'z'"]),
    ([{**GOOD_X, "datatype": "FP64"}, GOOD_OFFSET], 400, ["'x'", "FP64", "FP32"]),
    ([{**GOOD_X, "shape": [1, 7], "data": list(range(7))}, GOOD_OFFSET], 400, ["'x'", "[1, 7]", "[-1, 8]"]),
    ([{**GOOD_X, "datatype": "FLOAT32"}, GOOD_OFFSET], 400, ["'x'", "FLOAT32", "FP32"]),
    ([{**GOOD_X, "data": [1, 2]}, GOOD_OFFSET], 400, ["'x'", "2 values", "needs 8"]),
    ([{**GOOD_X, "shape": "1x8"}, GOOD_OFFSET], 400, ["'x'", "shape"]),
    ([{**GOOD_X, "data": ["a"] * 8}, GOOD_OFFSET], 400, ["'x'", "FP32"]),
    ([GOOD_X, {**GOOD_OFFSET, "data": [1.5]}], 400, ["'offset'", "INT64", "fractional"]),
    ([GOOD_X, {**GOOD_OFFSET, "data": [2 ** 70]}], 400, ["'offset'", "INT64"]),
    ([{**GOOD_X, "shape": [1 << 40, 8]}, GOOD_OFFSET], 413, ["'x'", "memory budget"]),
    ([{**GOOD_X, "shape": [17, 8], "data": [0.0] * 136}, {**GOOD_OFFSET, "shape": [17, 1], "data": [0] * 17}],
     400, ["17", "max_batch_size"]),
])
def test_bad_json_tensors_get_a_4xx_naming_the_tensor(server, inputs, status, words):
    got, body = infer_json(server, "mlp", inputs)
    assert got == status, body
    assert all(w in body["error"] for w in words), body


def test_binary_payload_that_does_not_match_its_shape(server):
    x = np.zeros((1, 8), np.float32).tobytes()
    off = np.zeros((1, 1), np.int64).tobytes()
    def request(x_bytes: bytes, declared: int) -> tuple[int, dict]:
        head = json.dumps({"inputs": [
            {"name": "x", "datatype": "FP32", "shape": [1, 8], "parameters": {"binary_data_size": declared}},
            {"name": "offset", "datatype": "INT64", "shape": [1, 1], "parameters": {"binary_data_size": 8}}]}).encode()
        return post(server, "/v2/models/mlp/infer", head + x_bytes + off,
                    {"Inference-Header-Content-Length": str(len(head))})
    assert request(x, 32)[0] == 200
    status, body = request(x[:28], 28)  # 7 floats for a [1, 8] tensor
    assert status == 400 and "'x'" in body["error"] and "28 bytes" in body["error"] and "32" in body["error"]
    status, body = request(x, 40)  # claims more than there is
    assert status == 400 and "'x'" in body["error"] and "40 bytes" in body["error"] and "needs 32" in body["error"]
    status, body = request(x + b"\0" * 4, 32)  # bytes nobody claims
    assert status == 400 and "not claimed" in body["error"]
    head = b'{"inputs": []}'
    status, body = post(server, "/v2/models/mlp/infer", head, {"Inference-Header-Content-Length": "99"})
    assert status == 400 and "Inference-Header-Content-Length" in body["error"]


def test_malformed_json_and_body_over_the_limit(server):
    status, body = post(server, "/v2/models/mlp/infer", b'{"inputs": [')
    assert status == 400 and "not valid JSON" in body["error"]
    status, body = post(server, "/v2/models/mlp/infer", b"[1, 2]")
    assert status == 400 and "JSON object" in body["error"]
    status, body = post(server, "/v2/models/mlp/infer", b" " * (MAX_REQUEST_BYTES + 1))
    assert status == 413 and str(MAX_REQUEST_BYTES) in body["error"]


def test_model_names_cannot_escape_the_repository(server):
    for path in ("/v2/models/..%2F..%2Fetc/infer", "/v2/models/%2e%2e/infer", "/v2/models/../mlp/infer"):
        status, body = post(server, path, json.dumps({"inputs": [GOOD_X, GOOD_OFFSET]}).encode())
        assert status in (404, 405) and "error" in body, (path, status, body)


def test_deadline_from_the_timeout_parameter(client):
    with pytest.raises(InferenceServerException, match="deadline") as e:
        client.infer("squeezenet_batch", triton_inputs({"data_0": image()}), timeout=1)  # 1 µs
    assert e.value.status() == "504"


def test_a_full_queue_answers_503_and_the_rest_succeed(client):
    """16 requests at once at a model that takes ~0.1 s a run, one instance, a queue of 2:
    every answer is a result or a 503 naming the full queue, and the queue fills."""
    x = {"x": RS.rand(64, 1024).astype(np.float32)}
    pending = [client.async_infer("slow", triton_inputs(x)) for _ in range(16)]
    ok, full = 0, 0
    for p in pending:
        try:
            np.testing.assert_allclose(p.get_result().as_numpy("y"), x["x"], rtol=1e-6)
            ok += 1
        except InferenceServerException as e:
            assert e.status() == "503" and "queue is full" in e.message()
            full += 1
    assert ok >= 3 and full >= 1 and ok + full == 16


def test_a_client_that_goes_away_is_counted_and_nothing_breaks(server, client):
    body = json.dumps({"inputs": [{"name": "data_0", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                   "parameters": {"binary_data_size": 602112}}]}).encode()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.addresses["http_port"])) as s:
            s.sendall(b"POST /v2/models/squeezenet_batch/infer HTTP/1.1\r\nHost: x\r\nContent-Length: "
                      + str(len(body) + 602112).encode() + b"\r\nInference-Header-Content-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n" + body + image().tobytes())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and 'status="499"' not in metrics(server):
        time.sleep(0.2)
    assert 'status="499"' in metrics(server)
    assert client.infer("mlp", triton_inputs(mlp_feeds(1))).as_numpy("y").shape == (1, 4)


def test_server_survives_every_bad_request(client, server):
    threads = [threading.Thread(target=infer_json, args=(server, "mlp", [{**GOOD_X, "datatype": "X"}]))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert client.is_server_live() and client.infer("mlp", triton_inputs(mlp_feeds(2))).as_numpy("y").shape == (2, 4)
    assert server.proc.poll() is None


# ------------------------------------------------------------------- metrics and placement
def metrics(server) -> str:
    conn = http.client.HTTPConnection(server.http_address, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def metric_value(text: str, key: str) -> float:
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no metric {key}")


def test_metrics_and_placement(server, client, repo):
    client.infer("mlp", triton_inputs(mlp_feeds(1)))
    text = metrics(server)
    for name in ("nnrt_serve_requests_total", "nnrt_serve_request_failures_total", "nnrt_serve_queue_seconds_bucket",
                 "nnrt_serve_compute_seconds_bucket", "nnrt_serve_batch_rows_bucket", "nnrt_serve_model_ready"):
        assert name in text
    assert metric_value(text, 'nnrt_serve_requests_total{model="mlp",protocol="http"}') >= 1
    # bad requests are counted whether they fail decoding (malformed JSON: 400) or the checks
    assert metric_value(text, 'nnrt_serve_request_failures_total{model="mlp",protocol="http",status="400"}') >= 10
    assert metric_value(text, 'nnrt_serve_request_failures_total{model="mlp",protocol="http",status="413"}') >= 1
    conn = http.client.HTTPConnection(server.http_address, timeout=30)
    conn.request("GET", "/v2/models/mlp/placement")
    doc = json.loads(conn.getresponse().read())
    conn.close()
    from nnrt_core import Session
    sess = Session(repo / "mlp" / "2" / "model.onnx")  # the generic plan (the server's may be specialized)
    assert {r["node"] for r in doc["placement"]} == set(sess.placement)
    assert {p["backend"] for p in doc["partitions"]} <= set(sess.registry.backends)
    # mlp runs 2 instances (MLP_TOML) and names no num_threads: the server splits the cores between them
    served = sess.config.replace(num_threads=max(1, (os.cpu_count() or 1) // 2))
    assert doc["version"] == "2" and doc["batching"] is True and doc["config"] == served.to_dict()
    assert f'backends="{"+".join(sorted({p.backend for p in sess.partitions}))}"' in text


def test_the_server_on_asyncios_own_loop_answers_the_same(tmp_path, repo, client):
    """``--loop asyncio`` (the default is uvloop's when installed): the same answers over HTTP."""
    small = make_repository(tmp_path / "models", squeeze=False)
    s = start_server(small, "--loop", "asyncio", "--grpc-port", "off", exit_after=120)
    try:
        feeds = mlp_feeds(2)
        c = httpclient.InferenceServerClient(s.http_address, network_timeout=60)
        got = c.infer("mlp", triton_inputs(feeds)).as_numpy("y")
        c.close()
        want = client.infer("mlp", triton_inputs(feeds)).as_numpy("y")  # the module's server, default loop
    finally:
        s.stop()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, reference(small / "mlp" / "2" / "model.onnx", feeds)["y"], rtol=1e-5, atol=1e-6)
