"""A float64 reference for a real model: its float32 tensors widened to
float64 and run on nnrt's NumPy backend (whose kernels are dtype-generic).

``real_models.py --f64`` compares both ONNX Runtime and nnrt with it: where
nnrt differs from ORT by more than the fp32 tolerance but is at least as
close to the float64 result as ORT itself is, the difference is ORT's own
fp32 rounding, not an nnrt error.  A model the NumPy backend cannot run in
float64 (an op without a float64 kernel, a contrib op that is float32 only)
gets no reference (``None``) and is compared with ORT alone.

Inputs the spec types as float32 whatever the data's type stay float32:
Resize's (and Upsample's) ``scales`` get a Cast back to float before the
node (a widened initializer round-trips exactly).
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, numpy_helper

__all__ = ["float64_copy", "float64_steps", "worst_vs"]

Feeds = dict[str, np.ndarray]


#: op type -> the input that the spec types as float32 only (the data's type does not follow)
FLOAT32_INPUTS = {"Resize": 2, "Upsample": 1}


def _keep_float32_inputs(g: onnx.GraphProto) -> None:
    """A Cast to float before every FLOAT32_INPUTS input of ``g``'s nodes (after widening)."""
    nodes = []
    for k, n in enumerate(g.node):
        i = FLOAT32_INPUTS.get(n.op_type)
        if i is not None and i < len(n.input) and n.input[i]:
            cast = f"{n.input[i]}__float32_{k}"
            nodes.append(onnx.helper.make_node("Cast", [n.input[i]], [cast], to=TensorProto.FLOAT,
                                               name=f"{n.name or n.op_type}__float32_{k}"))
            n.input[i] = cast
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)


def _widen_graph(g: onnx.GraphProto) -> None:
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for v in [*g.input, *g.output, *g.value_info]:
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    del g.value_info[:]  # shapes are inferred again
    for n in g.node:
        for a in n.attribute:
            if a.name in ("to", "dtype") and a.type == AttributeProto.INT and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
            elif a.type == AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            elif a.type == AttributeProto.GRAPH:
                _widen_graph(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _widen_graph(sub)
    _keep_float32_inputs(g)


def float64_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float32 initializer, value, Cast target and constant attribute in float64."""
    m = copy.deepcopy(model)
    _widen_graph(m.graph)
    return m


def float64_steps(path: Path, names: list[str], steps: list[Feeds], carry: dict[str, str],
                  run_steps: Callable) -> list[list[np.ndarray]] | None:
    """The outputs ``names`` of every step computed in float64 (``None`` when the
    NumPy backend cannot build or run the float64 copy)."""
    from nnrt_core import ScheduleConfig, Session

    try:
        sess = Session(float64_copy(onnx.load(str(path))).SerializeToString(), ScheduleConfig(backends=["numpy"]))
        wide = [{k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in f.items()} for f in steps]
        return run_steps(lambda f: [sess.run(f)[n] for n in names], names, wide, carry)
    except Exception:  # noqa: BLE001 - no reference for this model, not a failure of it
        return None


def worst_vs(got: list[list[np.ndarray]], ref64: list[list[np.ndarray]]) -> tuple[float, float]:
    """(largest max|got - ref| / max|ref|, largest rel L2) over the float outputs of every step."""
    worst = worst_l2 = 0.0
    for g_step, r_step in zip(got, ref64):
        for a, b in zip(g_step, r_step):
            b = np.asarray(b)
            if b.dtype.kind != "f" or not b.size:
                continue
            if np.shape(a) != b.shape:
                return float("inf"), float("inf")
            a64, b64 = np.asarray(a, np.float64), b.astype(np.float64)
            worst = max(worst, float(np.abs(a64 - b64).max() / max(np.abs(b64).max(), 1e-30)))
            worst_l2 = max(worst_l2, float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30)))
    return worst, worst_l2
