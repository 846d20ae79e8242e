"""nnrt serve on Ray Serve (``nnrt serve --ray``): 2 replicas on a local Ray
started by the server's child process; the same protocol answers as the
plain server, and a replica killed during load is replaced with no request
left without an answer."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

pytest.importorskip("nnrt_serve")
pytest.importorskip("ray.serve")
pytest.importorskip("nnrt_ray")
httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

from serve_support import MLP_TOML, make_repository, start_server  # noqa: E402

RS = np.random.RandomState(5)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = make_repository(tmp_path_factory.mktemp("serve-ray") / "models", squeeze=False)
    (repo / "mlp" / "nnrt.toml").write_text('backends = ["onnxruntime"]\n' + MLP_TOML)
    s = start_server(repo, "--ray", "--replicas", "2", exit_after=400)
    s.repo = repo
    yield s
    s.stop(timeout=60)


def inputs(n: int) -> tuple[dict, list]:
    feeds = {"x": RS.randn(n, 8).astype(np.float32), "offset": RS.randint(0, 3, (n, 1)).astype(np.int64)}
    ins = []
    for name, arr in feeds.items():
        i = httpclient.InferInput(name, list(arr.shape), "FP32" if arr.dtype == np.float32 else "INT64")
        i.set_data_from_numpy(arr)
        ins.append(i)
    return feeds, ins


def replicas(server) -> list[int]:
    return [p for p, c in server.descendants() if "ServeReplica:nnrt" in c]


def test_replicas_answer_like_session_run(server):
    from nnrt_core import ScheduleConfig, Session

    c = httpclient.InferenceServerClient(server.http_address, network_timeout=60)
    assert c.is_server_ready() and c.get_model_metadata("mlp")["versions"] == ["2"]
    feeds, ins = inputs(3)
    res = c.infer("mlp", ins, request_id="ray-1")
    want = Session(server.repo / "mlp" / "2" / "model.onnx", ScheduleConfig(backends=["onnxruntime"])).run(feeds)
    np.testing.assert_allclose(res.as_numpy("y"), want["y"], rtol=1e-5, atol=1e-6)
    assert res.get_response()["id"] == "ray-1"
    bad = [ins[0]]
    with pytest.raises(InferenceServerException, match="missing input") as e:
        c.infer("mlp", bad)
    assert e.value.status() == "400"
    c.close()


# tritonclient.http's clients close again in __del__, which gevent refuses on another thread when the
# garbage collector frees one that a client thread made (after its close): a client-side warning only
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_killed_replica_is_replaced_and_no_request_hangs(server):
    deadline = time.monotonic() + 90
    while len(replicas(server)) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    before = replicas(server)
    assert len(before) == 2, server.descendants()
    stats = {"ok": 0, "error": 0, "hung": 0}
    lock = threading.Lock()
    stop_at = time.monotonic() + 12

    def client_loop() -> None:
        c = httpclient.InferenceServerClient(server.http_address, network_timeout=30, connection_timeout=30)
        while time.monotonic() < stop_at:
            _, ins = inputs(1)
            try:
                c.infer("mlp", ins)
                key = "ok"
            except InferenceServerException:
                key = "error"  # an answer: the proxy's error for a request on the dead replica
            except Exception as e:  # a timeout or a broken connection: no answer
                key = "hung" if "timed out" in str(e).lower() or isinstance(e, TimeoutError) else "error"
                c.close()
                c = httpclient.InferenceServerClient(server.http_address, network_timeout=30)
            with lock:
                stats[key] += 1
        c.close()

    threads = [threading.Thread(target=client_loop) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(3)
    os.kill(before[0], signal.SIGKILL)  # a replica of the cluster our server started
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert stats["hung"] == 0, stats
    assert stats["ok"] > 0, stats
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = replicas(server)
        if len(now) == 2 and before[0] not in now:
            break
        time.sleep(1)
    assert len(replicas(server)) == 2 and before[0] not in replicas(server)
    c = httpclient.InferenceServerClient(server.http_address, network_timeout=60)
    ok = 0
    for _ in range(6):  # both replicas answer again
        ok += c.infer("mlp", inputs(1)[1]).as_numpy("y").shape == (1, 4)
    c.close()
    assert ok == 6
