"""Model repositories for the nnrt serve tests: the onnx wheel's light
SqueezeNet (informative random weights, as a fixed-batch model and with its
batch dimension freed) and a small two-input MLP with a free batch dimension."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import LIGHT_DIR
from light_weights import he_initialized

__all__ = ["squeezenet", "free_batch", "mlp_model", "make_repository", "MLP_TOML", "SQUEEZE_BATCH_TOML", "start_server",
           "reference", "MAX_REQUEST_BYTES"]

MLP_TOML = "max_batch_size = 16\nmax_queue_delay_ms = 2\ninstances = 2\nmax_queue_size = 64\n"
SQUEEZE_BATCH_TOML = "max_batch_size = 8\nmax_queue_delay_ms = 4\ninstances = 1\n"


def squeezenet() -> onnx.ModelProto:
    return he_initialized(onnx.load(str(LIGHT_DIR / "light_squeezenet.onnx")), seed=1)


def free_batch(m: onnx.ModelProto, name: str = "N") -> onnx.ModelProto:
    """``m`` with the first dimension of every graph input and output made symbolic."""
    for v in [*m.graph.input, *m.graph.output]:
        dims = v.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = name
    del m.graph.value_info[:]
    return m


def mlp_model(seed: int = 0) -> onnx.ModelProto:
    """y = relu(x @ W + float(offset)) [N, 4] and its argmax [N, 1] (INT64),
    from x [N, 8] FP32 and offset [N, 1] INT64."""
    rs = np.random.RandomState(seed)
    w = numpy_helper.from_array(rs.randn(8, 4).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]),
             helper.make_node("Cast", ["offset"], ["off_f"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["xw", "off_f"], ["pre"]),
             helper.make_node("Relu", ["pre"], ["y"]),
             helper.make_node("ArgMax", ["y"], ["idx"], axis=1, keepdims=1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8]),
                                         helper.make_tensor_value_info("offset", TensorProto.INT64, ["N", 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
                           helper.make_tensor_value_info("idx", TensorProto.INT64, ["N", 1])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def make_repository(root: Path, squeeze: bool = True) -> Path:
    """squeezenet/ (batch 1), squeezenet_batch/ (free batch, batching on), mlp/2/ (free batch, 2 instances),
    slow/ (tens of ms a run, queue of 2, one instance)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "mlp" / "2").mkdir(parents=True)
    onnx.save(mlp_model(), str(root / "mlp" / "2" / "model.onnx"))
    (root / "mlp" / "nnrt.toml").write_text(MLP_TOML)
    if squeeze:
        (root / "squeezenet").mkdir()
        onnx.save(squeezenet(), str(root / "squeezenet" / "model.onnx"))
        (root / "squeezenet" / "nnrt.toml").write_text(SMALL_QUEUE_TOML)
        (root / "squeezenet_batch").mkdir()
        onnx.save(free_batch(squeezenet()), str(root / "squeezenet_batch" / "model.onnx"))
        (root / "squeezenet_batch" / "nnrt.toml").write_text(SQUEEZE_BATCH_TOML)
        (root / "slow").mkdir()
        onnx.save(slow_model(), str(root / "slow" / "model.onnx"))
        (root / "slow" / "nnrt.toml").write_text(SMALL_QUEUE_TOML + "instances = 1\n")
    return root


def slow_model(steps: int = 64) -> onnx.ModelProto:
    """``y = x @ I @ I ...`` on [64, 1024] x [1024, 1024]: ~9 GFLOP a run (~0.1 s), values unchanged,
    so requests pile up behind one another whatever the machine's load."""
    import numpy as np
    from onnx import numpy_helper

    eye = numpy_helper.from_array(np.eye(1024, dtype=np.float32), "w")
    names = ["x"] + [f"t{i}" for i in range(steps - 1)] + ["y"]
    nodes = [helper.make_node("MatMul", [names[i], "w"], [names[i + 1]], name=f"mm{i}") for i in range(steps)]
    g = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 1024])], [eye])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


SMALL_QUEUE_TOML = "max_queue_size = 2\n"
MAX_REQUEST_BYTES = 8 << 20


def start_server(root: Path, *extra: str, exit_after: float = 600):
    """``nnrt serve`` on 127.0.0.1 (free ports) in a child process, ready; it stops by itself after ``exit_after``."""
    from nnrt_serve.process import ServerProcess

    return ServerProcess(root, extra_args=["--max-request-bytes", str(MAX_REQUEST_BYTES), *extra],
                         exit_after=exit_after).start()


def reference(model_path: Path, feeds: dict) -> dict:
    """What an in-process Session.run answers (the default config, as the server's)."""
    from nnrt_core import Session

    return Session(model_path).run(feeds)
