"""One-node com.microsoft models run on ONNX Runtime (the reference) and on
nnrt's NumPy backend, for the contrib-op tests (``test_numpy_contrib_vs_ort``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.helper import np_dtype_to_tensor_dtype

from nnrt_core import ScheduleConfig, Session

__all__ = ["one_node_model", "reference", "numpy_run", "relative_error", "compare", "Input"]

MS = "com.microsoft"
Input = tuple[str, "np.ndarray | None"]  # (name, value); None: an omitted optional input


def one_node_model(op: str, inputs: Sequence[Input], attrs: dict[str, Any], out_types: Sequence[int],
                   ranks: Sequence[int] | None = None, initializers: Sequence[str] = (),
                   domain: str = MS) -> tuple[bytes, dict[str, np.ndarray]]:
    """A model of one ``op`` node; the names in ``initializers`` become
    initializers, the other present inputs graph inputs (returned as feeds).
    Outputs get symbolic shapes of the given ``ranks`` (None: no shape)."""
    names, graph_inputs, inits, feeds = [], [], [], {}
    for name, value in inputs:
        if value is None:
            names.append("")
            continue
        names.append(name)
        if name in initializers:
            inits.append(numpy_helper.from_array(value, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, np_dtype_to_tensor_dtype(value.dtype), value.shape))
            feeds[name] = value
    outs = [f"out{i}" for i in range(len(out_types))]
    node = helper.make_node(op, names, outs, domain=domain, name=f"{op}_node", **attrs)
    outputs = [helper.make_tensor_value_info(o, t, None if ranks is None else [f"{o}_d{j}" for j in range(ranks[k])])
               for k, (o, t) in enumerate(zip(outs, out_types))]
    graph = helper.make_graph([node], "g", graph_inputs, outputs, inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString(), feeds


def reference(data: bytes, feeds: dict[str, np.ndarray], threads: int = 0) -> list[np.ndarray]:
    """ONNX Runtime's CPU outputs (``threads=1`` for kernels whose rounding depends on the split)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def numpy_run(data: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    out = Session(data, ScheduleConfig(backends=["numpy"])).run(feeds)
    return [np.asarray(v) for v in out.values()]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (0 for empty or all-zero references that match)."""
    assert got.shape == want.shape, f"shape {got.shape} != reference {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != reference {want.dtype}"
    if want.size == 0:
        return 0.0
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    scale = float(np.max(np.abs(want.astype(np.float64))))
    return diff / scale if scale else diff


def compare(op: str, inputs: Sequence[Input], attrs: dict[str, Any], out_types: Sequence[int] | int = 1,
            initializers: Sequence[str] = (), threads: int = 0, domain: str = MS) -> list[float]:
    """Per-output relative errors of the NumPy backend against ONNX Runtime."""
    if isinstance(out_types, int):
        out_types = [TensorProto.FLOAT] * out_types
    data, feeds = one_node_model(op, inputs, attrs, out_types, initializers=initializers, domain=domain)
    want = reference(data, feeds, threads)  # ORT accepts outputs without shapes; nnrt's checker wants a rank
    data, feeds = one_node_model(op, inputs, attrs, out_types, [w.ndim for w in want], initializers, domain)
    got = numpy_run(data, feeds)
    return [relative_error(g, w) for g, w in zip(got, want)]
