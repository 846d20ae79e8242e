"""nnrt serve over gRPC, driven by the real Triton client (tritonclient.grpc),
and the shipped .proto checked against Triton's and the shipped stubs against
a fresh generation.  The server runs in a child process: tritonclient's
stubs and ours define the same protobuf names, which one process's
descriptor pool refuses to hold twice."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nnrt_serve")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

from serve_support import make_repository, reference, start_server  # noqa: E402

PROTO_DIR = Path(__file__).resolve().parent.parent / "plugins" / "serve"
PROTO = "nnrt_serve/protocol/grpc_predict_v2.proto"
RS = np.random.RandomState(11)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repository(tmp_path_factory.mktemp("serve-grpc") / "models")


@pytest.fixture(scope="module")
def server(repo):
    s = start_server(repo)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    c = grpcclient.InferenceServerClient(server.grpc_address)
    yield c
    c.close()


def inputs(feeds: dict[str, np.ndarray]) -> list:
    out = []
    for name, arr in feeds.items():
        dt = "FP32" if arr.dtype == np.float32 else "INT64"
        i = grpcclient.InferInput(name, list(arr.shape), dt)
        i.set_data_from_numpy(arr)
        out.append(i)
    return out


def mlp_feeds(n: int) -> dict[str, np.ndarray]:
    return {"x": RS.randn(n, 8).astype(np.float32), "offset": RS.randint(0, 3, (n, 1)).astype(np.int64)}


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.get_server_metadata().name == "nnrt"
    assert client.is_model_ready("mlp")
    meta = client.get_model_metadata("mlp", as_json=True)
    assert meta["platform"] == "nnrt" and meta["versions"] == ["2"]
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [("x", "FP32", ["-1", "8"]),
                                                                                ("offset", "INT64", ["-1", "1"])]


def test_squeezenet_and_mlp_outputs_match_session_run(client, repo):
    x = RS.rand(1, 3, 224, 224).astype(np.float32)
    res = client.infer("squeezenet", inputs({"data_0": x}), request_id="g1")
    want = reference(repo / "squeezenet" / "model.onnx", {"data_0": x})["softmaxout_1"]
    np.testing.assert_allclose(res.as_numpy("softmaxout_1"), want, rtol=1e-5, atol=1e-7)
    assert res.get_response().id == "g1"
    feeds = mlp_feeds(3)
    res = client.infer("mlp", inputs(feeds), outputs=[grpcclient.InferRequestedOutput("idx")])
    want = reference(repo / "mlp" / "2" / "model.onnx", feeds)
    np.testing.assert_array_equal(res.as_numpy("idx"), want["idx"])
    assert res.as_numpy("y") is None  # only the requested output


def test_concurrent_requests_are_batched(client, repo):
    feeds = [mlp_feeds(n) for n in (1, 2, 1, 3, 1, 2, 1, 1)]
    results: list = [None] * len(feeds)
    for i, f in enumerate(feeds):
        client.async_infer("mlp", inputs(f),
                           callback=lambda result, error, i=i: results.__setitem__(i, (result, error)))
    deadline = time.monotonic() + 60
    while any(r is None for r in results) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(r is not None for r in results), "a request hung"
    for f, (r, e) in zip(feeds, results):
        assert e is None
        np.testing.assert_allclose(r.as_numpy("y"), reference(repo / "mlp" / "2" / "model.onnx", f)["y"],
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case, status, words", [
    ("unknown model", "NOT_FOUND", ["nope"]),
    ("unknown version", "NOT_FOUND", ["'5'"]),
    ("missing input", "INVALID_ARGUMENT", ["missing", "offset"]),
    ("wrong dtype", "INVALID_ARGUMENT", ["'x'", "FP64", "FP32"]),
    ("wrong shape", "INVALID_ARGUMENT", ["'x'", "[1, 9]"]),
    ("raw size mismatch", "INVALID_ARGUMENT", ["'x'", "bytes"]),
])
def test_bad_requests_get_the_status_and_a_message_naming_the_tensor(client, case, status, words):
    feeds = mlp_feeds(1)
    model, version, ins = "mlp", "", inputs(feeds)
    if case == "unknown model":
        model = "nope"
    elif case == "unknown version":
        version = "5"
    elif case == "missing input":
        ins = ins[:1]
    elif case == "wrong dtype":
        ins[0] = grpcclient.InferInput("x", [1, 8], "FP64")
        ins[0].set_data_from_numpy(feeds["x"].astype(np.float64))
    elif case == "wrong shape":
        ins[0] = grpcclient.InferInput("x", [1, 9], "FP32")
        ins[0].set_data_from_numpy(RS.randn(1, 9).astype(np.float32))
    elif case == "raw size mismatch":
        ins[0] = grpcclient.InferInput("x", [1, 5], "FP32")
        ins[0].set_data_from_numpy(feeds["x"][:, :5].copy())
        ins[0].set_shape([1, 8])  # 20 bytes for a [1, 8] FP32 tensor
    with pytest.raises(InferenceServerException) as e:
        client.infer(model, ins, model_version=version)
    assert e.value.status() == f"StatusCode.{status}", e.value
    assert all(w in e.value.message() for w in words), e.value.message()
    assert client.is_server_live()


def test_a_datatype_string_the_protocol_does_not_know(server):
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    req = service_pb2.ModelInferRequest(model_name="mlp")
    for name, dt, shape in (("x", "FLOAT", [1, 8]), ("offset", "INT64", [1, 1])):
        req.inputs.add(name=name, datatype=dt, shape=shape)
    req.raw_input_contents.extend([bytes(32), bytes(8)])
    with grpc.insecure_channel(server.grpc_address) as channel:
        with pytest.raises(grpc.RpcError) as e:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(req, timeout=60)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "'x'" in e.value.details() and "FLOAT" in e.value.details() and "FP32" in e.value.details()


def test_deadline_from_the_call(client):
    x = RS.rand(1, 3, 224, 224).astype(np.float32)
    with pytest.raises(InferenceServerException) as e:
        client.infer("squeezenet_batch", inputs({"data_0": x}), timeout=1)  # the timeout parameter: 1 µs
    assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    assert client.infer("squeezenet_batch", inputs({"data_0": x}), client_timeout=60).as_numpy("softmaxout_1").shape \
        == (1, 1000, 1, 1)


def _descriptor_of_our_proto(tmp_path: Path):
    from google.protobuf import descriptor_pb2

    out = tmp_path / "set.pb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", str(PROTO_DIR), f"--descriptor_set_out={out}",
                    PROTO], check=True)
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]


def test_the_proto_matches_tritons_for_every_message_and_rpc(tmp_path):
    pytest.importorskip("grpc_tools")
    from google.protobuf import descriptor_pb2
    from tritonclient.grpc import service_pb2

    ours = _descriptor_of_our_proto(tmp_path)
    theirs = descriptor_pb2.FileDescriptorProto()
    service_pb2.DESCRIPTOR.CopyToProto(theirs)
    assert ours.package == theirs.package == "inference"
    def fields(msgs, prefix=""):
        out = {}
        for m in msgs:
            out[prefix + m.name] = {(f.name, f.number, f.type, f.label) for f in m.field}
            out.update(fields(m.nested_type, prefix + m.name + "."))
        return out
    mine, triton = fields(ours.message_type), fields(theirs.message_type)
    for name, fs in mine.items():
        if name.startswith("Repository") or name.endswith("ParametersEntry"):
            continue
        assert name in triton, name
        assert fs <= triton[name], (name, fs - triton[name])
    rpcs = {m.name: (m.input_type, m.output_type) for m in ours.service[0].method}
    trpcs = {m.name: (m.input_type, m.output_type) for m in theirs.service[0].method}
    assert ours.service[0].name == theirs.service[0].name == "GRPCInferenceService"
    for name in ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer"):
        assert rpcs[name] == trpcs[name]


def test_the_shipped_stubs_are_what_protoc_generates(tmp_path):
    pytest.importorskip("grpc_tools")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", str(PROTO_DIR), f"--python_out={tmp_path}",
                    f"--pyi_out={tmp_path}", f"--grpc_python_out={tmp_path}", PROTO], check=True)
    for name in ("grpc_predict_v2_pb2.py", "grpc_predict_v2_pb2.pyi", "grpc_predict_v2_pb2_grpc.py"):
        shipped = (PROTO_DIR / "nnrt_serve" / "protocol" / name).read_text()
        assert (tmp_path / "nnrt_serve" / "protocol" / name).read_text() == shipped, name
