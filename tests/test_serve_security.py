"""nnrt serve's security defaults: loopback unless told, a bearer token for
anything else (and, when set, for every route but health), and the CLI's
answer when the serve package is missing."""
from __future__ import annotations

import http.client
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("nnrt_serve")
httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

from serve_support import make_repository, start_server  # noqa: E402


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repository(tmp_path_factory.mktemp("serve-sec") / "models", squeeze=False)


def get(address: str, path: str, headers: dict | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(address, timeout=30)
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, json.loads(body) if body.startswith(b"{") else {}


def test_the_default_bind_is_loopback_and_another_needs_a_token(repo):
    from nnrt_serve.server import ServerOptions

    assert ServerOptions().host == "127.0.0.1"
    r = subprocess.run([sys.executable, "-m", "nnrt_serve", "--model-repository", str(repo), "--host", "0.0.0.0",
                        "--exit-after", "5"], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "NNRT_SERVE_TOKEN": ""})
    assert r.returncode == 2
    assert "0.0.0.0" in r.stderr and "needs a bearer token" in r.stderr and "--token" in r.stderr


def test_a_token_guards_every_route_but_health(repo):
    s = start_server(repo, "--token", "s3cret")
    try:
        assert get(s.http_address, "/v2/health/ready")[0] == 200
        status, body = get(s.http_address, "/v2/models/mlp")
        assert status == 401 and "Bearer" in body["error"]
        assert get(s.http_address, "/v2/models/mlp", {"Authorization": "Bearer wrong"})[0] == 401
        assert get(s.http_address, "/metrics")[0] == 401
        auth = {"Authorization": "Bearer s3cret"}
        assert get(s.http_address, "/v2/models/mlp", auth)[0] == 200
        x = np.ones((1, 8), np.float32)
        off = np.zeros((1, 1), np.int64)
        c = httpclient.InferenceServerClient(s.http_address)
        ins = [httpclient.InferInput("x", [1, 8], "FP32"), httpclient.InferInput("offset", [1, 1], "INT64")]
        ins[0].set_data_from_numpy(x)
        ins[1].set_data_from_numpy(off)
        with pytest.raises(InferenceServerException, match="Bearer"):
            c.infer("mlp", ins)
        assert c.infer("mlp", ins, headers=auth).as_numpy("y").shape == (1, 4)
        c.close()
        g = grpcclient.InferenceServerClient(s.grpc_address)
        gins = [grpcclient.InferInput("x", [1, 8], "FP32"), grpcclient.InferInput("offset", [1, 1], "INT64")]
        gins[0].set_data_from_numpy(x)
        gins[1].set_data_from_numpy(off)
        with pytest.raises(InferenceServerException) as e:
            g.infer("mlp", gins)
        assert e.value.status() == "StatusCode.UNAUTHENTICATED"
        assert g.infer("mlp", gins, headers={"authorization": "Bearer s3cret"}).as_numpy("y").shape == (1, 4)
        g.close()
    finally:
        s.stop()


def test_nnrt_serve_without_the_package_says_how_to_install_it(monkeypatch):
    import importlib.metadata

    from nnrt_core.errors import ConfigError
    from nnrt_core.tools import serve_cli

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [])
    with pytest.raises(ConfigError, match=r"pip install ./plugins/serve"):
        serve_cli.serve_command()
