"""Tests of the emulated NPU backend plugin (``plugins/npu_emu``)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nnrt_npu_emu")

from nnrt_core.backend import CompileOptions  # noqa: E402
from nnrt_core.config import ScheduleConfig  # noqa: E402
from nnrt_core.errors import CompileError, ConfigError, ExecutionError, NnrtError  # noqa: E402
from nnrt_core.frontends import load_onnx  # noqa: E402
from nnrt_core.registry import Registry  # noqa: E402
from conformance_data import spec_defined  # noqa: E402
from nnrt_core.session import Session  # noqa: E402
from nnrt_npu_emu.backend import NpuEmuBackend, NpuTensor  # noqa: E402
from nnrt_npu_emu.blob import FORMAT_VERSION, OfflineModelError  # noqa: E402

from light_weights import he_initialized  # noqa: E402
from nnrt_npu_emu.memory import DeviceMemoryError  # noqa: E402
from nnrt_npu_emu.offline import load_offline, save_offline  # noqa: E402
from nnrt_npu_emu.ops import OPS  # noqa: E402
from nnrt_npu_emu.profiles import load_profiles  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
F16 = "emu-npu-f16"
I8 = "emu-npu-i8"


# ------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def registry() -> Registry:
    reg = Registry()
    assert reg.backends["npu_emu"].available, reg.backends["npu_emu"].reason
    return reg


@pytest.fixture(scope="module")
def backend(registry) -> NpuEmuBackend:
    return registry.backends["npu_emu"].backend


def _cfg(**kw) -> ScheduleConfig:
    kw.setdefault("backends", ["npu_emu"])
    kw.setdefault("backup", "numpy")
    kw.setdefault("precision", "fp16")  # the chip's own precision (under fp32 it declines float nodes)
    return ScheduleConfig(**kw)


def _ort(model, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    if isinstance(data, str):
        data = Path(data).read_bytes()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-12))


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    g = h.make_graph(nodes, "m", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def _small_cnn(seed: int = 0, lrn: bool = False, resize: bool = True) -> onnx.ModelProto:
    rs = np.random.RandomState(seed)

    def w(name, *shape, s=0.3):
        return nh.from_array((rs.randn(*shape) * s).astype(np.float32), name)

    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"])]
    last = "r1"
    if lrn:
        nodes.append(h.make_node("LRN", ["r1"], ["l1"], size=3))
        last = "l1"
    nodes += [h.make_node("MaxPool", [last], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
              h.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8),
              h.make_node("HardSwish", ["c2"], ["r2"]),
              h.make_node("Add", ["r2", "p1"], ["a2"]),
              h.make_node("Resize", ["a2", "", "sc"], ["u2"], mode="linear") if resize else
              h.make_node("Identity", ["a2"], ["u2"]),
              h.make_node("GlobalAveragePool", ["u2"], ["g"]),
              h.make_node("Flatten", ["g"], ["f"]),
              h.make_node("Gemm", ["f", "w3", "b3"], ["y0"], transB=1),
              h.make_node("Softmax", ["y0"], ["y"])]
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 8, 1, 3, 3), w("w3", 10, 8), w("b3", 10),
             nh.from_array(np.array([1, 1, 2, 2], np.float32), "sc")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits, opset=14)


def _x(shape=(1, 3, 16, 16), seed=1) -> np.ndarray:
    return np.random.RandomState(seed).rand(*shape).astype(np.float32)


def _randomize_light(path: Path, seed: int = 0) -> onnx.ModelProto:
    """The light model with random He-scaled weights (so that outputs are informative)."""
    return he_initialized(onnx.load(str(path)), seed)


# ---------------------------------------------------------------- discovery
def test_discovery_and_devices(registry, backend):
    rec = registry.backends["npu_emu"]
    assert rec.priority == 100 and rec.device_type == "npu"
    devs = rec.to_dict()["devices"]
    names = [d["name"] for d in devs]
    assert F16 in names and I8 in names
    f16 = next(d for d in devs if d["name"] == F16)
    assert f16["precisions"] == ["fp16"] and f16["properties"]["device_memory_bytes"] > 0
    assert f16["properties"]["macs_per_cycle"]["fp16"] > 0
    assert backend.host_memory is False and "precision" in backend.supported_options
    assert len(OPS) >= 56


# ---------------------------------------------------------- light models
@pytest.mark.parametrize("name", ["squeezenet", "resnet50"])
def test_light_model_runs_entirely_on_fp16_npu(name):
    path = LIGHT / f"light_{name}.onnx"
    sess = Session(str(path), _cfg())
    assert {p.backend for p in sess.partitions} == {"npu_emu"}
    assert len(sess.partitions) == 1
    d = sess.partitions[0].details
    assert d["chip"].endswith(f"{F16}@1.0") and d["precision"] == "fp16"
    assert d["est_cycles"] > 0 and len(d["per_op"]) == d["instructions"]
    inp = sess.inputs[0]
    x = _x(tuple(inp.shape), seed=3)
    got = list(sess.run({inp.name: x}).values())[0]
    ref = _ort(str(path), {inp.name: x})[0]
    assert got.dtype == np.float32 and got.shape == ref.shape
    # the constant 0.02 weights drive activations past fp16 range: the chip's
    # stores saturate, so the (uniform) softmax still matches
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=1e-4)


@pytest.mark.parametrize("name", ["squeezenet", "resnet50"])
def test_light_model_random_weights_fp16_error(name):
    m = _randomize_light(LIGHT / f"light_{name}.onnx")
    sess = Session(m, _cfg())
    assert {p.backend for p in sess.partitions} == {"npu_emu"}
    inp = sess.inputs[0]
    x = _x(tuple(inp.shape), seed=4)
    got = list(sess.run({inp.name: x}).values())[0]
    ref = _ort(m, {inp.name: x})[0]
    # softmax probabilities: fp16 storage keeps them within a few percent
    assert np.abs(got - ref).max() < 2e-2 * max(ref.max(), 1e-3) + 1e-4, np.abs(got - ref).max()
    assert np.argmax(got) == np.argmax(ref)


def test_precision_fp32_profile_vs_fp16(tmp_path):
    prof = tmp_path / "chips.toml"
    prof.write_text('[[chip]]\nname = "emu-fp32"\ndtypes = ["fp32", "fp16"]\n'
                    'macs_per_cycle = {fp32 = 256, fp16 = 512}\n')
    m = _small_cnn()
    x = _x()
    ref = _ort(m, {"x": x})[0]
    opts = {"npu_emu": {"profile_file": str(prof)}}
    s32 = Session(m, _cfg(precision="fp32", devices={"npu_emu": "emu-fp32"}, backend_options=opts))
    s16 = Session(m, _cfg(precision="fp16", devices={"npu_emu": "emu-fp32"}, backend_options=opts))
    assert s32.partitions[0].details["precision"] == "fp32"
    assert s16.partitions[0].details["precision"] == "fp16"
    e32 = _rel_err(s32.run({"x": x})["y"], ref)
    e16 = _rel_err(s16.run({"x": x})["y"], ref)
    assert e32 < 1e-5 < e16 < 2e-2
    # fp16 runs faster on this chip (more MACs per cycle)
    assert s16.partitions[0].details["est_cycles"] < s32.partitions[0].details["est_cycles"]


def test_heterogeneous_partitioning_matches(backend):
    m = _small_cnn(lrn=True)
    sess = Session(m, _cfg())
    backends = [p.backend for p in sess.partitions]
    assert backends == ["npu_emu", "numpy", "npu_emu"]
    lrn = next(p for p in sess.placement_report if p.op_type == "LRN")
    assert "not in the NPU op set" in lrn.rejected["npu_emu"]
    x = _x()
    backend = sess.registry.backends["npu_emu"].backend
    before = backend.copy_counts()
    got = sess.run({"x": x})["y"]
    after = backend.copy_counts()
    np.testing.assert_allclose(got, _ort(m, {"x": x})[0], rtol=2e-2, atol=2e-3)
    # x up, LRN input down, LRN output up, y down
    assert after["to_device"] - before["to_device"] == 2
    assert after["to_host"] - before["to_host"] == 2
    assert sess.stats()["host_device_copies"] == 4


# --------------------------------------------------------------------- int8
def _qdq_model(tmp_path: Path) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    fp = tmp_path / "small.onnx"
    onnx.save(_small_cnn(seed=2, resize=False), fp)  # the int8 chip has no Resize
    rs = np.random.RandomState(5)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rs.rand(1, 3, 16, 16).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)

    q = tmp_path / "small_qdq.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_static(str(fp), str(q), Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8, per_channel=True)
    return q


def test_int8_qdq_model_on_int8_chip(tmp_path):
    q = _qdq_model(tmp_path)
    sess = Session(str(q), _cfg(precision="int8", devices={"npu_emu": I8}))
    parts = [p for p in sess.partitions if p.backend == "npu_emu"]
    kernels = [op["kernel"] for op in parts[0].details["per_op"]]
    assert "qconv" in kernels and "qgemm" in kernels
    assert all(op["dtype"] == "int8" for op in parts[0].details["per_op"] if op["kernel"].startswith("q"))
    x = _x(seed=6)
    got = sess.run({"x": x})["y"]
    ref = _ort(str(q), {"x": x})[0]
    # int32 accumulation + requantization: within a couple of output LSBs of ORT's QDQ run
    assert np.abs(got - ref).max() <= 2.5 / 255, np.abs(got - ref).max()


def test_int8_chip_rejects_float_ops(backend):
    m = load_onnx(_small_cnn())
    cap = backend.capability(m.graph, CompileOptions(precision="fp16", device=I8))
    assert not cap.supported
    assert "only in int8" in next(iter(cap.rejected.values()))


# ------------------------------------------------------------- offline blob
_CHILD = """
import sys, numpy as np
from nnrt_npu_emu.offline import load_offline
part = load_offline(sys.argv[1])
x = np.load(sys.argv[2])
out = part.run({part.input_names[0]: x})
np.save(sys.argv[3], part.backend.to_host(out[part.output_names[0]]))
"""


def _compiled(backend, model=None, options=None):
    m = load_onnx(model or _small_cnn())
    return backend.compile(m.graph, options or CompileOptions(precision="fp16"))


def test_offline_model_round_trip_in_new_process(backend, tmp_path):
    part = _compiled(backend)
    x = _x()
    want = backend.to_host(part.run({"x": x})["y"])
    path = save_offline(part, tmp_path / "m.npumodel")
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)
    # and in this process, through Backend.load_compiled
    again = backend.load_compiled(path.read_bytes(), CompileOptions(precision="fp16"))
    np.testing.assert_array_equal(backend.to_host(again.run({"x": x})["y"]), want)
    assert again.describe()["est_cycles"] == part.describe()["est_cycles"]


def test_offline_model_refusals(backend, tmp_path):
    blob = _compiled(backend).serialize()
    corrupt = bytearray(blob)
    corrupt[-10] ^= 0xFF
    with pytest.raises(CompileError, match="checksum"):
        backend.load_compiled(bytes(corrupt), CompileOptions(precision="fp16"))
    with pytest.raises(CompileError, match="truncated"):
        backend.load_compiled(blob[: len(blob) // 2], CompileOptions(precision="fp16"))
    with pytest.raises(CompileError, match="truncated"):
        backend.load_compiled(blob[:20], CompileOptions(precision="fp16"))
    with pytest.raises(CompileError, match="magic"):
        backend.load_compiled(b"PK\x03\x04" + blob[4:], CompileOptions(precision="fp16"))
    newer = bytearray(blob)
    struct.pack_into("<I", newer, 8, FORMAT_VERSION + 1)
    with pytest.raises(CompileError, match="newer"):
        backend.load_compiled(bytes(newer), CompileOptions(precision="fp16"))
    with pytest.raises(CompileError, match="compiled for chip"):
        backend.load_compiled(blob, CompileOptions(precision="fp16", device=I8))
    with pytest.raises(OfflineModelError):
        load_offline(_write(tmp_path / "bad.npumodel", b"garbage" * 10), backend=backend)
    with pytest.raises(CompileError, match="does not exist"):
        load_offline(tmp_path / "missing.npumodel", backend=backend)


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def test_offline_model_for_unknown_chip(tmp_path):
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"chips": [{"name": "acme-n1", "vendor": "acme", "dtypes": ["fp16"]}]}))
    b1 = NpuEmuBackend()
    part = _compiled(b1, options=CompileOptions(device="acme-n1", precision="fp16", extra={"profile_file": str(prof)}))
    blob = part.serialize()
    b2 = NpuEmuBackend()  # a process that does not know the chip
    with pytest.raises(CompileError, match="acme/acme-n1@1.0"):
        b2.load_compiled(blob, CompileOptions(precision="fp16"))
    assert b1.load_compiled(blob, CompileOptions(precision="fp16")).describe()["chip"] == "acme/acme-n1@1.0"


# -------------------------------------------------------------- conformance
def _freeze(proto: onnx.ModelProto, inputs):
    """Inputs that feed parameter slots (shapes, axes, scales...) become
    initializers, as they are when a model is deployed on an NPU."""
    frozen = set()
    for n in proto.graph.node:
        d = OPS.get(n.op_type)
        slots = (d.const_inputs if d else ()) + ((1, 2) if n.op_type == "ConvTranspose" else ())
        frozen.update(n.input[i] for i in slots if i < len(n.input) and n.input[i])
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    feeds, keep = {}, []
    for vi, x in zip(proto.graph.input, inputs):
        arr = nh.to_array(x) if isinstance(x, onnx.TensorProto) else x
        if vi.name in frozen and isinstance(arr, (np.ndarray, np.generic)):
            m.graph.initializer.append(nh.from_array(np.asarray(arr), vi.name))
        else:
            keep.append(vi)
            feeds[vi.name] = np.asarray(arr) if not isinstance(arr, list) else arr
    del m.graph.input[:]
    m.graph.input.extend(keep)
    return m, feeds


def _close(a: np.ndarray, b: np.ndarray, r: float) -> bool:
    scale = max(1.0, float(np.nanmax(np.abs(b))) if b.size else 1.0)
    bad = ~(np.abs(a.astype(np.float64) - b) <= r * scale + r * np.abs(b)) & ~(np.isnan(a) & np.isnan(b)) & ~(a == b)
    return not bad.any()


def _conformance(backend, device: str, precision: str, rtol: float) -> tuple[int, list[str]]:
    from onnx.backend.test.case.node import collect_testcases
    from onnx.reference import ReferenceEvaluator

    claimed, failures = 0, []
    for case in collect_testcases():
        if case.kind != "node" or not case.data_sets:
            continue
        inputs, outputs = spec_defined(case)[0]  # float -> int out of range is undefined by the spec
        try:
            m, feeds = _freeze(case.model, inputs)
            graph = load_onnx(m).graph
        except Exception:
            continue
        cap = backend.capability(graph, CompileOptions(precision=precision, device=device))
        if len(cap.supported) != len(graph.nodes):
            continue
        claimed += 1
        try:
            sess = Session(m, _cfg(backup=None, precision=precision, devices={"npu_emu": device}))
            res = list(sess.run(feeds).values())
            ref16 = None
            for k, (a, b) in enumerate(zip(res, outputs)):
                b = nh.to_array(b) if isinstance(b, onnx.TensorProto) else np.asarray(b)
                assert a.shape == b.shape and a.dtype == b.dtype, f"{a.dtype}{a.shape} vs {b.dtype}{b.shape}"
                ok = _close(a, b, rtol)
                if not ok and precision == "fp16":
                    # inputs the chip stores in fp16 are rounded first (e.g. softmax of 10000+i)
                    if ref16 is None:
                        f16 = {n: x.astype(np.float16).astype(x.dtype) if x.dtype.kind == "f" else x
                               for n, x in feeds.items()}
                        ref16 = ReferenceEvaluator(m).run(None, f16)
                    ok = _close(a, np.asarray(ref16[k]), rtol)
                assert ok, f"output {k}: max error {np.nanmax(np.abs(a.astype(np.float64) - b))}"
        except Exception as e:
            failures.append(f"{case.name}: {type(e).__name__}: {str(e)[:200]}")
    return claimed, failures


def test_conformance_fp16_chip(backend):
    claimed, failures = _conformance(backend, F16, "fp16", 1e-2)
    assert claimed >= 300, claimed
    assert not failures, "\n".join(failures)


def test_conformance_int8_chip_quant_ops(backend):
    claimed, failures = _conformance(backend, I8, "int8", 1e-2)
    assert claimed >= 2, claimed
    assert not failures, "\n".join(failures)


def test_capability_reasons(backend):
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 2, 4, 4])
    cases = [
        (h.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER"), "SAME_LOWER"),
        (h.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic"), "mode='cubic'"),
        (h.make_node("TopK", ["x", "k"], ["y", "i"]), "not in the NPU op set"),
        (h.make_node("Reshape", ["x", "shape_in"], ["y"]), "compile-time constant"),
    ]
    inits = [nh.from_array(np.ones((2, 2, 1, 1), np.float32), "w"), nh.from_array(np.ones(4, np.float32), "s"),
             nh.from_array(np.array([1], np.int64), "k")]
    for node, reason in cases:
        ins = [x] + ([h.make_tensor_value_info("shape_in", T.INT64, [2])] if node.op_type == "Reshape" else [])
        m = _model([node], ins, [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
        g = load_onnx(m, check=False).graph
        cap = backend.capability(g, CompileOptions(precision="fp16"))
        assert reason in cap.rejected[g.nodes[0].name], cap.rejected
    # dynamic shapes and rank
    m = _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])],
               [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])])
    g = load_onnx(m).graph
    assert "static shapes" in backend.capability(g, CompileOptions(precision="fp16")).rejected[g.nodes[0].name]
    m = _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [1] * 6)],
               [h.make_tensor_value_info("y", T.FLOAT, [1] * 6)])
    g = load_onnx(m).graph
    assert "rank" in backend.capability(g, CompileOptions(precision="fp16")).rejected[g.nodes[0].name]
    m = _model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.DOUBLE, [2])],
               [h.make_tensor_value_info("y", T.DOUBLE, [2])])
    g = load_onnx(m).graph
    assert "dtype" in backend.capability(g, CompileOptions(precision="fp16")).rejected[g.nodes[0].name]


# ----------------------------------------------------- execution and memory
def test_queue_async_and_threads(backend):
    part = _compiled(backend)
    xs = [_x(seed=i) for i in range(6)]
    futs = [part.run_async({"x": x}) for x in xs]
    seq = [backend.to_host(f.result()["y"]) for f in futs]
    results: dict[int, np.ndarray] = {}

    def worker(i):
        results[i] = backend.to_host(part.run({"x": xs[i]})["y"])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(6):
        np.testing.assert_array_equal(results[i], seq[i])
    assert part.device.queue.completed >= 12
    assert part.last_profile["cycles"] == part.describe()["est_cycles"]
    assert part.last_profile["host_seconds"] > 0


def test_zero_copy_device_tensors(backend):
    part = _compiled(backend)
    t = backend.allocate((1, 3, 16, 16), np.float32, part.device.id)
    assert isinstance(t, NpuTensor) and backend.owns(t) and not backend.owns(np.zeros(1))
    x = _x()
    t.data[...] = x  # mapped device memory: no counted transfer
    before = backend.copy_counts()
    out = part.run({"x": t})["y"]
    assert isinstance(out, NpuTensor)
    assert backend.copy_counts() == before
    np.testing.assert_array_equal(backend.to_host(out), backend.to_host(part.run({"x": x})["y"]))
    assert backend.copy_counts()["to_device"] == before["to_device"] + 1


def test_memory_planner_reuses_workspace(backend):
    part = _compiled(backend, _randomize_light(LIGHT / "light_squeezenet.onnx"))
    prog = part.program
    ws_values = {(o.offset, o.nbytes) for i in prog.instrs for o in i.outs if o.space == "ws"}
    total = sum(n for _, n in ws_values)
    assert prog.ws_size < total / 2
    # live buffers never overlap: replay lifetimes (one operand object per value;
    # reshape-like aliases share their source's offset)
    spans: dict[int, list] = {}
    for k, ins in enumerate(prog.instrs):
        for o in [x for x in ins.ins if x is not None] + ins.outs:
            if o.space == "ws":
                spans.setdefault(id(o), [k, k, o])[1] = k
    items = list(spans.values())
    for i, (a1, b1, p1) in enumerate(items):
        for a2, b2, p2 in items[i + 1:]:
            if a1 <= b2 and a2 <= b1 and p1.offset < p2.offset + p2.nbytes and p2.offset < p1.offset + p1.nbytes:
                assert p1.offset == p2.offset, f"overlapping live buffers {p1} {p2}"


def test_warm_up_tunes_the_allocator_before_prefaulting_the_workspace(backend, monkeypatch):
    """Without the tuning the prefault is a no-op (freed pages would go back to
    the OS), which an NPU-only session, with no NumPy partition to tune it, hit."""
    import nnrt_npu_emu.backend as npu_backend
    calls = []
    monkeypatch.setattr(npu_backend, "tune_allocator", lambda: calls.append("tune") or True)
    monkeypatch.setattr(npu_backend, "prefault_heap", lambda n: calls.append(n) or True)
    part = _compiled(backend, _randomize_light(LIGHT / "light_squeezenet.onnx"))
    part.warm_up()
    assert calls == ["tune", part.program.ws_size] and part.program.ws_size > 0


def test_cost_model(backend):
    part = _compiled(backend, _randomize_light(LIGHT / "light_squeezenet.onnx"))
    d = part.describe()
    prof = part.device.profile
    assert d["est_time_ms"] == pytest.approx(d["est_cycles"] / (prof.clock_mhz * 1e3))
    convs = [op for op in d["per_op"] if op["kernel"] == "conv"]
    assert convs and all(op["cycles"] >= prof.launch_cycles for op in d["per_op"])
    big = max(convs, key=lambda op: op["macs"])
    assert big["bound"] == "compute" and big["cycles"] >= big["macs"] / prof.mpc("fp16")
    assert any(op["bound"] == "memory" for op in d["per_op"])
    assert d["macs"] == sum(op["macs"] for op in d["per_op"]) > 3e8


# ---------------------------------------------------------------- bad input
def test_unknown_profile_is_config_error():
    with pytest.raises(ConfigError, match="no device or chip profile 'nope'"):
        Session(_small_cnn(), _cfg(devices={"npu_emu": "nope"}))


def test_malformed_profile_files(tmp_path):
    bad_toml = _write(tmp_path / "bad.toml", b"[[chip]\nname = ")
    with pytest.raises(ConfigError, match="malformed"):
        load_profiles(bad_toml)
    bad_field = _write(tmp_path / "f.json", json.dumps({"chips": [{"name": "x", "dtypes": ["fp64"]}]}).encode())
    with pytest.raises(ConfigError, match="dtypes"):
        load_profiles(bad_field)
    unknown = _write(tmp_path / "u.json", json.dumps({"name": "x", "clock": 1}).encode())
    with pytest.raises(ConfigError, match="unknown profile key"):
        load_profiles(unknown)
    with pytest.raises(ConfigError, match="malformed"):
        Session(_small_cnn(), _cfg(backend_options={"npu_emu": {"profile_file": str(bad_toml)}}))
    # through the environment: listed as an unavailable device, built-ins still there
    env = dict(os.environ, NNRT_NPU_PROFILES=str(bad_toml))
    code = ("from nnrt_npu_emu.backend import NpuEmuBackend; import json; "
            "print(json.dumps([d.to_dict() for d in NpuEmuBackend().devices()]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    devs = json.loads(r.stdout)
    assert devs[0]["name"] == F16 and devs[-1]["available"] is False and "malformed" in devs[-1]["reason"]


def test_working_set_larger_than_device_memory(tmp_path, backend):
    # SqueezeNet needs ~2.5 MB of fp16 weights + ~3 MB of planned workspace
    prof = _write(tmp_path / "tiny.toml", b'[[chip]]\nname = "tiny"\ndtypes = ["fp16"]\ndevice_memory_mib = 5\n')
    opts = CompileOptions(device="tiny", precision="fp16", extra={"profile_file": str(prof)})
    model = _randomize_light(LIGHT / "light_squeezenet.onnx")
    with pytest.raises(CompileError, match="device memory"):
        backend.compile(load_onnx(model).graph, opts)
    # the session falls back to the backup backend and still answers correctly
    sess = Session(model, _cfg(devices={"npu_emu": "tiny"},
                               backend_options={"npu_emu": {"profile_file": str(prof)}}))
    assert any(e.kind == "compile_fallback" for e in sess.events)
    assert {p.backend for p in sess.partitions} == {"numpy"}
    x = _x((1, 3, 224, 224))
    np.testing.assert_allclose(sess.run({"data_0": x})["softmaxout_1"], _ort(model, {"data_0": x})[0],
                               rtol=1e-3, atol=1e-6)
    # a host tensor larger than the device memory is refused on upload
    with pytest.raises(DeviceMemoryError, match="exhausted") as ei:
        backend.to_device(np.zeros((2 << 20,), np.float32), "tiny")
    assert isinstance(ei.value, ExecutionError)


def test_bad_feeds_are_clear_errors(backend):
    part = _compiled(backend)
    with pytest.raises(NnrtError, match="expects float32"):
        part.run({"x": np.zeros((1, 3, 16, 16), np.float64)})
    with pytest.raises(NnrtError, match="misses input"):
        part.run({})
