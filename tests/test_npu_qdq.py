"""QDQ (int8) models on the emulated NPU: one device region per model, Q/DQ
absorbed into int8 instructions, numerics against ONNX Runtime."""
from __future__ import annotations

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
from nnrt_core.frontends import load_onnx  # noqa: E402
from nnrt_core.registry import Registry  # noqa: E402
from nnrt_core.session import Session  # noqa: E402


class QdqGraph:
    """A small QDQ graph written by hand (what ``nnrt quantize`` / ORT's quantizer emit)."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.rs = np.random.RandomState(seed)

    def const(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(nh.from_array(np.asarray(arr), name))
        return name

    def qdq(self, x: str, scale: float, zp: int = 0) -> str:
        """Quantize ``x`` to int8 and dequantize it again (an activation Q/DQ pair)."""
        s = self.const(f"{x}_s", np.float32(scale))
        z = self.const(f"{x}_z", np.int8(zp))
        self.nodes += [h.make_node("QuantizeLinear", [x, s, z], [f"{x}_q"]),
                       h.make_node("DequantizeLinear", [f"{x}_q", s, z], [f"{x}_dq"])]
        return f"{x}_dq"

    def weights(self, name: str, w: np.ndarray, axis: int | None = 0) -> str:
        """Symmetric int8 weights (per channel along ``axis``, or per tensor) and their DequantizeLinear."""
        if axis is None:
            s = np.float32(np.abs(w).max() / 127)
            q = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
            z = np.int8(0)
            attrs = {}
        else:
            red = tuple(i for i in range(w.ndim) if i != axis)
            s = (np.abs(w).max(axis=red) / 127).astype(np.float32)
            q = np.clip(np.rint(w / np.expand_dims(s, red)), -127, 127).astype(np.int8)
            z = np.zeros(s.shape, np.int8)
            attrs = {"axis": axis}
        self.nodes.append(h.make_node("DequantizeLinear", [self.const(f"{name}_q", q), self.const(f"{name}_s", s),
                                                           self.const(f"{name}_z", z)], [name], **attrs))
        return name

    def bias(self, name: str, b: np.ndarray, scale: np.ndarray) -> str:
        """An int32 bias with scale = input scale * weight scale."""
        q = np.rint(b / scale).astype(np.int32)
        self.nodes.append(h.make_node("DequantizeLinear", [self.const(f"{name}_q", q),
                                                           self.const(f"{name}_s", scale.astype(np.float32))],
                                      [name], axis=0))
        return name

    def add(self, op: str, ins: list[str], out: str, **attrs) -> str:
        self.nodes.append(h.make_node(op, ins, [out], **attrs))
        return out

    def model(self, inputs, outputs, opset: int = 13) -> onnx.ModelProto:
        g = h.make_graph(self.nodes, "qdq", inputs, outputs, self.inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
        onnx.checker.check_model(m)
        return m


def _cnn(out_scale: float = 0.05, logit_scale: float = 0.1) -> onnx.ModelProto:
    """Q(input) -> conv+relu (per-channel weights, int32 bias) -> maxpool -> two conv branches
    concatenated with different scales -> add (residual) -> avgpool -> GAP -> flatten -> gemm -> softmax."""
    g = QdqGraph(0)
    rs = g.rs
    x = g.qdq("x", 1 / 127)
    w1 = rs.randn(8, 3, 3, 3).astype(np.float32) * 0.4
    sw1 = np.abs(w1).reshape(8, -1).max(1) / 127
    c1 = g.add("Conv", [x, g.weights("w1", w1), g.bias("b1", rs.randn(8).astype(np.float32) * 0.1,
                                                         sw1 * (1 / 127))], "c1", pads=[1, 1, 1, 1])
    r1 = g.qdq(g.add("Relu", [c1], "r1"), 0.02, -128)
    p1 = g.qdq(g.add("MaxPool", [r1], "p1", kernel_shape=[2, 2], strides=[2, 2]), 0.02, -128)
    a = g.qdq(g.add("Conv", [p1, g.weights("wa", rs.randn(4, 8, 1, 1).astype(np.float32) * 0.3)], "ca"), 0.03, 3)
    b = g.qdq(g.add("Conv", [p1, g.weights("wb", rs.randn(4, 8, 3, 3).astype(np.float32) * 0.2, None)], "cb",
                    pads=[1, 1, 1, 1]), 0.05, -2)
    cat = g.qdq(g.add("Concat", [a, b], "cat", axis=1), 0.05, 0)
    res = g.qdq(g.add("Add", [cat, p1], "res"), 0.06, -10)
    avg = g.qdq(g.add("AveragePool", [res], "avg", kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1]),
                0.04, -5)
    gap = g.qdq(g.add("GlobalAveragePool", [avg], "gap"), out_scale, 0)
    fl = g.qdq(g.add("Flatten", [gap], "fl"), out_scale, 0)
    logits = g.add("Gemm", [fl, g.weights("wf", rs.randn(5, 8).astype(np.float32), 0)], "logits", transB=1)
    lq = g.qdq(logits, logit_scale, 0)
    g.qdq(g.add("Softmax", [lq], "prob"), 1 / 255, -128)
    return g.model([h.make_tensor_value_info("x", T.FLOAT, [1, 3, 12, 12])],
                   [h.make_tensor_value_info("prob_dq", T.FLOAT, [1, 5]),
                    h.make_tensor_value_info("logits_dq", T.FLOAT, [1, 5])])


def _npu(model, **kw) -> Session:
    return Session(model, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="int8", **kw))


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _kernels(sess: Session) -> list[str]:
    return [op["kernel"] for p in sess.partitions if p.backend == "npu_emu" for op in p.details["per_op"]]


def test_qdq_cnn_is_one_int8_region():
    sess = _npu(_cnn())  # no chip named: precision int8 picks the int8 chip
    assert [p.backend for p in sess.partitions] == ["npu_emu"]
    part = sess.partitions[0]
    assert part.details["chip"].split("/")[1].startswith("emu-npu-i8")
    ops = set(part.op_types)
    assert {"QuantizeLinear", "DequantizeLinear", "Conv", "Concat", "Add", "Softmax"} <= ops
    kernels = _kernels(sess)
    assert kernels.count("qconv") == 3 and kernels.count("qgemm") == 1 and "qmaxpool" in kernels
    assert kernels.count("qlinear") >= 4  # concat, add, average pools (flatten aliases the int8 data)
    # activation Q/DQ pairs are absorbed: only the boundary quantize of the input and dequantize of the outputs
    assert kernels.count("quantize") == 1 and kernels.count("dequantize") == 2
    assert "conv" not in kernels and "gemm" not in kernels


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_qdq_cnn_matches_onnxruntime(seed):
    model = _cnn()
    x = np.random.RandomState(seed).rand(1, 3, 12, 12).astype(np.float32) * 2 - 1
    y, z = _npu(model).run({"x": x}).values()
    ry, rz = _ort(model, {"x": x})
    # int32 accumulation + requantization: at most one output step away from ORT's float QDQ run
    assert np.abs(z - rz).max() <= 0.1 + 1e-6, (z, rz)
    # softmax moves by at most half the logits' difference (plus its own output step)
    assert np.abs(y - ry).max() <= 0.5 * np.abs(z - rz).max() + 2 / 255 + 1e-6


def test_saturation_with_huge_values():
    """Logits around 1e10 (the untrained light models): requantization saturates like ORT, nothing becomes 0."""
    g = QdqGraph(4)
    x = g.qdq("x", 1e7, 0)  # inputs of ~1e9
    w = np.full((6, 4, 1, 1), 50.0, np.float32)
    w[::2] *= -1
    c = g.add("Conv", [x, g.weights("w", w)], "c")
    # the output scale covers +-1.27e10 while the products reach 2e11: most values saturate at +-127
    g.qdq(c, 1e8, 0)
    model = g.model([h.make_tensor_value_info("x", T.FLOAT, [1, 4, 3, 3])],
                    [h.make_tensor_value_info("c_dq", T.FLOAT, [1, 6, 3, 3])])
    xv = (np.random.RandomState(0).randn(1, 4, 3, 3) * 1e9).astype(np.float32)
    sess = _npu(model)
    assert len(sess.partitions) == 1 and "qconv" in _kernels(sess)
    got = sess.run({"x": xv})["c_dq"]
    ref = _ort(model, {"x": xv})[0]
    assert got.max() == pytest.approx(127e8) and got.min() == pytest.approx(-128e8)
    assert np.count_nonzero(got) > got.size // 2
    assert np.abs(got - ref).max() <= 1e8 * 1.0001


def test_inexact_float32_sums_use_exact_gemm():
    """Weights whose int32 sums exceed float32's 24-bit integers: the result is still exact."""
    g = QdqGraph(5)
    x = g.qdq("x", 1.0, -128)
    w = np.full((2, 600, 3, 3), 1.0, np.float32)  # K = 5400, every weight 127: sums up to 1.7e8
    w[1, ::3] = -0.5
    c = g.add("Conv", [x, g.weights("w", w)], "c", pads=[1, 1, 1, 1])
    g.qdq(c, 2e4, 0)
    model = g.model([h.make_tensor_value_info("x", T.FLOAT, [1, 600, 4, 4])],
                    [h.make_tensor_value_info("c_dq", T.FLOAT, [1, 2, 4, 4])])
    sess = _npu(model)
    prog = sess.compiled_model.compiled
    instrs = [i for p in (prog.values() if isinstance(prog, dict) else prog) if hasattr(p, "program")
              for i in p.program.instrs if i.kernel == "qconv"]
    assert instrs and instrs[0].attrs["gemm"] in ("split", "f64")
    xv = np.random.RandomState(1).randint(-128, 128, (1, 600, 4, 4)).astype(np.float32) + 128
    got = sess.run({"x": xv})["c_dq"]
    # exact integer reference: int64 convolution, one rounding
    wq = np.rint(w / (np.abs(w).reshape(2, -1).max(1) / 127).reshape(2, 1, 1, 1)).astype(np.int64)
    # x in [0, 255] with scale 1 and zero point -128: the centered integers q - z are x itself
    xp = np.pad(xv.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[0, :, i:i + 4, j:j + 4] for i in range(3) for j in range(3)], 1)  # (600, 9, 4, 4)
    acc = np.einsum("ckhw,mck->mhw", cols, wq.reshape(2, 600, 9))
    ws = np.abs(w).reshape(2, -1).max(1) / 127
    want = np.clip(np.rint(acc * ws.astype(np.float32).reshape(2, 1, 1) / 2e4), -128, 127) * 2e4
    assert np.abs(got[0] - want).max() <= 2e4 * 1.0001
    ref = _ort(model, {"x": xv})[0]
    assert np.abs(got - ref).max() <= 2e4 * 1.0001


def test_fp16_chip_keeps_out_of_range_values_on_the_host():
    """A float op whose QuantizeLinear range exceeds fp16 would saturate at 65504 on the fp16 chip."""
    g = QdqGraph(6)
    x = g.qdq("x", 1.0, 0)
    c = g.add("Conv", [x, g.weights("w", np.full((2, 2, 1, 1), 1000.0, np.float32))], "c")
    g.qdq(c, 1e4, 0)
    model = g.model([h.make_tensor_value_info("x", T.FLOAT, [1, 2, 2, 2])],
                    [h.make_tensor_value_info("c_dq", T.FLOAT, [1, 2, 2, 2])])
    backend = Registry().backends["npu_emu"].backend
    graph = load_onnx(model).graph
    cap = backend.capability(graph, CompileOptions(device="emu-npu-f16", precision="fp16"))
    conv = next(n.name for n in graph.nodes if n.op_type == "Conv")
    assert conv in cap.rejected and "beyond fp16" in cap.rejected[conv]
    xv = np.full((1, 2, 2, 2), 100.0, np.float32)
    got = Session(model, ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="fp16",
                                        devices={"npu_emu": "emu-npu-f16"})).run({"x": xv})["c_dq"]
    np.testing.assert_allclose(got, _ort(model, {"x": xv})[0])
    assert got.max() == pytest.approx(2e5)


def test_offline_blob_of_another_plugin_version_is_refused_clearly():
    from onnx import TensorProto as T
    from onnx import helper as oh

    from nnrt_core import ScheduleConfig, Session
    from nnrt_npu_emu import blob as npu_blob
    from nnrt_npu_emu.blob import OfflineModelError
    from nnrt_npu_emu.version import __version__

    g = oh.make_graph([oh.make_node("Relu", ["x"], ["y"], name="relu")], "m",
                      [oh.make_tensor_value_info("x", T.FLOAT, [1, 8])], [oh.make_tensor_value_info("y", T.FLOAT, [1, 8])])
    sess = Session(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]), ScheduleConfig(precision="fp16", backends=["npu_emu"]))
    part = sess.compiled_model.compiled[0]
    meta, program, weights = npu_blob.decode(part.serialize())
    old = npu_blob.encode(program, weights, {**meta, "producer": "nnrt-backend-npu-emu 0.0.1"})
    backend = sess.compiled_model.steps[0].backend
    with pytest.raises(OfflineModelError, match=f"compiled by 'nnrt-backend-npu-emu 0.0.1'; this is "
                                                f"'nnrt-backend-npu-emu {__version__}'; recompile it"):
        backend.load_compiled(old, sess.config.compile_options("npu_emu"))
