"""nnrt serve's REST infer route in front of Starlette (``nnrt_serve.rest_infer``)
and the server's event loop choice, in-process with ASGI messages: the
route answers without the Starlette app, its answers and errors are those of
the protocol, a client gone while sending or waiting is a 499 and its run
is cancelled, and the other routes still go through Starlette."""
from __future__ import annotations

import asyncio
import json

import numpy as np
import onnx
import pytest

pytest.importorskip("nnrt_serve")
from nnrt_core.errors import ConfigError  # noqa: E402
from nnrt_serve.cli import event_loop_factory  # noqa: E402
from nnrt_serve.errors import ClientGone  # noqa: E402
from nnrt_serve.handlers import Handlers  # noqa: E402
from nnrt_serve.repository import ModelRepository  # noqa: E402
from nnrt_serve.rest import RestOptions, create_app  # noqa: E402
from nnrt_serve.rest_infer import watching_client  # noqa: E402

from serve_support import mlp_model  # noqa: E402

X = np.random.RandomState(5).randn(2, 8).astype(np.float32)
OFFSET = np.array([[1], [2]], dtype=np.int64)


def binary_body() -> tuple[bytes, int]:
    head = json.dumps({"id": "q", "inputs": [
        {"name": "x", "datatype": "FP32", "shape": [2, 8], "parameters": {"binary_data_size": X.nbytes}},
        {"name": "offset", "datatype": "INT64", "shape": [2, 1], "parameters": {"binary_data_size": OFFSET.nbytes}}],
        "parameters": {"binary_data_output": True}}).encode()
    return head + X.tobytes() + OFFSET.tobytes(), len(head)


def scope(path: str, method: str = "POST", headers: dict[str, str] | None = None, root_path: str = "") -> dict:
    return {"type": "http", "method": method, "path": root_path + path, "root_path": root_path,
            "raw_path": (root_path + path).encode(), "query_string": b"", "scheme": "http",
            "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 1234), "http_version": "1.1",
            "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}


async def call(app, sc: dict, chunks: list[bytes], disconnect_after: float | None = None) -> tuple[int, dict, bytes]:
    """Send ``chunks`` as the body; then ``receive`` tells the disconnect after ``disconnect_after`` s, or never."""
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        if disconnect_after is None:
            await asyncio.Event().wait()
        await asyncio.sleep(disconnect_after)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(sc, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.fixture()
def repo(tmp_path):
    (tmp_path / "m").mkdir()
    onnx.save(mlp_model(), str(tmp_path / "m" / "model.onnx"))
    (tmp_path / "m" / "nnrt.toml").write_text('backends = ["numpy"]\nmax_batch_size = 8\n')
    return tmp_path


class NoStarlette:
    """Stands for the Starlette app: every call is recorded."""

    def __init__(self, app) -> None:
        self.app, self.calls = app, []

    async def __call__(self, sc, receive, send) -> None:
        self.calls.append(sc["path"])
        await self.app(sc, receive, send)


def test_the_infer_route_answers_without_starlette_and_the_rest_goes_through_it(repo):
    async def main():
        h = Handlers(ModelRepository(repo))
        await h.load()
        app = create_app(h, RestOptions())
        app.app = starlette = NoStarlette(app.app)
        body, n = binary_body()
        half = len(body) // 2
        answers = {
            "binary": await call(app, scope("/v2/models/m/infer", headers={
                "Inference-Header-Content-Length": str(n)}), [body[:half], body[half:]]),
            "version": await call(app, scope("/v2/models/m/versions/1/infer", headers={
                "Inference-Header-Content-Length": str(n)}), [body]),
            "json": await call(app, scope("/v2/models/m/infer"), [json.dumps({"inputs": [
                {"name": "x", "datatype": "FP32", "shape": [2, 8], "data": X.ravel().tolist()},
                {"name": "offset", "datatype": "INT64", "shape": [2, 1], "data": [1, 2]}]}).encode()]),
            "mounted": await call(app, scope("/v2/models/m/infer", root_path="/proxy"), [b'{"inputs": []}']),
            "unknown": await call(app, scope("/v2/models/nope/infer"), [b"{}"]),
            "bad_json": await call(app, scope("/v2/models/m/infer"), [b'{"inputs": [']),
        }
        fast_calls = list(starlette.calls)
        answers["get"] = await call(app, scope("/v2/models/m/infer", method="GET"), [b""])
        answers["meta"] = await call(app, scope("/v2/models/m", method="GET"), [b""])
        text = h.metrics.text().decode()
        await h.close()
        return answers, fast_calls, starlette.calls, text

    answers, fast_calls, calls, text = asyncio.run(main())
    assert fast_calls == []  # the infer route, answers and errors alike, never reached the Starlette app
    status, headers, payload = answers["binary"]
    assert status == 200 and headers["content-type"] == "application/octet-stream"
    assert int(headers["content-length"]) == len(payload)
    n = int(headers["inference-header-content-length"])
    head = json.loads(payload[:n])
    assert head["id"] == "q" and head["model_name"] == "m" and [o["name"] for o in head["outputs"]] == ["y", "idx"]
    y = np.frombuffer(payload[n:n + head["outputs"][0]["parameters"]["binary_data_size"]], np.float32).reshape(2, 4)
    want = np.maximum(X @ onnx.numpy_helper.to_array(mlp_model().graph.initializer[0]) + OFFSET, 0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    assert answers["version"][0] == 200
    status, headers, payload = answers["json"]
    assert status == 200 and headers["content-type"] == "application/json"
    np.testing.assert_allclose(np.array(json.loads(payload)["outputs"][0]["data"]).reshape(2, 4), want, rtol=1e-5,
                               atol=1e-6)
    assert answers["mounted"][0] == 400 and "non-empty list" in json.loads(answers["mounted"][2])["error"]
    assert answers["unknown"][0] == 404 and "unknown model 'nope'" in json.loads(answers["unknown"][2])["error"]
    assert answers["bad_json"][0] == 400 and "not valid JSON" in json.loads(answers["bad_json"][2])["error"]
    assert answers["get"][0] == 405 and answers["meta"][0] == 200  # these went through Starlette
    assert calls == ["/v2/models/m/infer", "/v2/models/m"]
    assert 'nnrt_serve_requests_total{model="m",protocol="http"} 5.0' in text


def test_token_and_body_limit_on_the_infer_route(repo):
    async def main():
        h = Handlers(ModelRepository(repo))
        await h.load()
        app = create_app(h, RestOptions(max_request_bytes=100, token="secret"))
        out = {
            "none": await call(app, scope("/v2/models/m/infer"), [b"{}"]),
            "wrong": await call(app, scope("/v2/models/m/infer", headers={"Authorization": "Bearer nope"}), [b"{}"]),
            "large": await call(app, scope("/v2/models/m/infer", headers={"Authorization": "Bearer secret"}),
                                [b"x" * 60, b"x" * 60]),
            "declared": await call(app, scope("/v2/models/m/infer", headers={
                "Authorization": "Bearer secret", "Content-Length": "1000"}), [b"{}"]),
        }
        await h.close()
        return out

    out = asyncio.run(main())
    assert out["none"][0] == out["wrong"][0] == 401 and out["none"][1]["www-authenticate"] == "Bearer"
    assert out["large"][0] == 413 and "over the limit of 100 bytes" in json.loads(out["large"][2])["error"]
    assert out["declared"][0] == 413 and "1000 bytes" in json.loads(out["declared"][2])["error"]


def test_a_client_gone_while_waiting_cancels_its_work_in_the_same_task():
    async def main():
        started, cancelled = asyncio.Event(), []

        async def work():
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(asyncio.current_task())
                raise

        async def receive():
            await started.wait()
            return {"type": "http.disconnect"}

        with pytest.raises(ClientGone, match="went away"):
            await watching_client(receive, work())
        me = asyncio.current_task()
        assert me.cancelling() == 0  # the cancel that stopped the work is taken back
        result = await watching_client(lambda: asyncio.Event().wait(), asyncio.sleep(0, "done"))
        return cancelled, me, result

    cancelled, me, result = asyncio.run(main())
    assert cancelled == [me] and result == "done"  # the work ran in the caller's task: no task per request


def test_a_client_gone_while_sending_is_a_499(repo):
    async def main():
        h = Handlers(ModelRepository(repo))
        await h.load()
        app = create_app(h, RestOptions())
        messages = [{"type": "http.request", "body": b'{"inp', "more_body": True}, {"type": "http.disconnect"}]
        sent = []

        async def receive():
            return messages.pop(0)

        async def send(m):
            sent.append(m)

        await app(scope("/v2/models/m/infer"), receive, send)
        text = h.metrics.text().decode()
        await h.close()
        return sent, text

    sent, text = asyncio.run(main())
    assert sent[0]["status"] == 499 and "went away" in json.loads(sent[1]["body"])["error"]
    assert 'nnrt_serve_request_failures_total{model="m",protocol="http",status="499"} 1.0' in text


def test_event_loop_choice():
    uvloop = pytest.importorskip("uvloop")
    assert event_loop_factory("auto") is uvloop.new_event_loop
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    assert event_loop_factory("asyncio") is asyncio.new_event_loop
    with pytest.raises(ConfigError, match="--loop must be one of auto, uvloop, asyncio, got 'trio'"):
        event_loop_factory("trio")
