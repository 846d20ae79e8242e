"""One-node probe models for OpenVINO's capability check, many nodes per model.

A node is probed apart from its graph: its non-constant inputs become graph
inputs with their element type and rank only (every dimension free; with
``exact`` the static dimensions are kept), small constants (at most
:data:`SMALL_CONST_ELEMENTS` elements: shapes, axes, pads...) stay constants
with their values, and larger constants (weights) become graph inputs with
their exact static shape: OpenVINO's CPU plugin needs static weight shapes
(a Conv with free weight dims is refused) and any weight values will do.
Nodes with sub-graphs are probed whole, bodies included.

Many such nodes go into one probe model (each reads its own inputs), so one
``read_model`` + ``query_model`` answers for all of them.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import xxhash

from nnrt_openvino._core import (AttrKind, DataType, Graph, Node, OptionalType, SequenceType, TensorType, Value,
                                 clone_node, to_onnx)

__all__ = ["SMALL_CONST_ELEMENTS", "UntypedInputError", "node_signature", "has_static_dims", "probe_model"]

#: constants up to this many elements keep their values in a probe (and in the signature)
SMALL_CONST_ELEMENTS = 64


class UntypedInputError(ValueError):
    """A node input has no known type, so no probe can be built."""


def _small(v: Value) -> bool:
    return v.const is not None and np.asarray(v.const).size <= SMALL_CONST_ELEMENTS


def _type_sig(t: Any, exact: bool) -> Any:
    if isinstance(t, TensorType):
        if t.shape is None:
            return [int(t.dtype), None]
        return [int(t.dtype), [d if exact and isinstance(d, int) else None for d in t.shape]]
    if isinstance(t, (SequenceType, OptionalType)):
        return [type(t).__name__, _type_sig(t.elem, exact)]
    return "?"


def _input_sig(v: Value | None, exact: bool) -> Any:
    if v is None:
        return None
    if v.const is not None:
        arr = np.asarray(v.const)
        if _small(v):
            return ["c", str(arr.dtype), list(arr.shape), xxhash.xxh3_64_hexdigest(np.ascontiguousarray(arr).tobytes())
                    if arr.dtype != object else repr(arr.tolist())]
        return ["w", str(arr.dtype), list(arr.shape)]
    return _type_sig(v.type, exact)


def _attr_sig(a: Any) -> Any:
    if a.ref_attr_name:
        return [a.name, "ref", a.ref_attr_name]
    v = a.value
    if a.kind == AttrKind.TENSOR:
        arr = np.asarray(v)
        return [a.name, str(arr.dtype), list(arr.shape), xxhash.xxh3_64_hexdigest(arr.tobytes())
                if arr.size <= SMALL_CONST_ELEMENTS and arr.dtype != object else None]
    if a.kind in (AttrKind.GRAPH, AttrKind.GRAPHS):
        graphs = [v] if a.kind == AttrKind.GRAPH else list(v)
        return [a.name, [xxhash.xxh3_128_hexdigest(to_onnx(g).SerializeToString()) for g in graphs]]
    if a.kind == AttrKind.TENSORS:
        return [a.name, [[str(np.asarray(x).dtype), list(np.asarray(x).shape)] for x in v]]
    return [a.name, repr(v)]


def node_signature(node: Node, device: str, exact: bool = False) -> str:
    """A key for everything that decides whether OpenVINO on ``device`` takes ``node``."""
    ins = [_input_sig(v, exact) for v in node.inputs]
    outer = [_type_sig(v.type, exact) for v in node.outer_inputs()] if node.subgraphs() else []
    outs = [bool(v.name) for v in node.outputs]
    attrs = [_attr_sig(node.attributes[k]) for k in sorted(node.attributes)]
    opset = node.graph.opset_for("") if node.graph is not None else None
    body = json.dumps([device, ins, outer, outs, attrs, opset], separators=(",", ":"), default=str)
    tag = "=" if exact else "#"
    return f"{node.domain or 'ai.onnx'}::{node.op_type}@{node.opset}{tag}{xxhash.xxh3_128_hexdigest(body.encode())[:24]}"


def has_static_dims(node: Node) -> bool:
    """True when a non-constant input has a known dimension (an exact probe could differ)."""
    for v in node.all_inputs():
        t = v.type if v is not None and v.const is None else None
        if isinstance(t, TensorType) and t.shape is not None and any(isinstance(d, int) for d in t.shape):
            return True
    return False


def _probe_value(v: Value, name: str, exact: bool) -> Value:
    if v.const is not None:
        arr = np.asarray(v.const)
        if _small(v):
            return Value(name, v.type, const=arr)
        return Value(name, TensorType(DataType.from_numpy(arr.dtype), tuple(arr.shape)))
    return Value(name, _free(v.type, f"input {v.name!r}", exact))


def _free(t: Any, what: str, exact: bool) -> Any:
    if t is None:
        raise UntypedInputError(f"{what} has no known type")
    if isinstance(t, TensorType):
        if t.dtype == DataType.UNDEFINED:
            raise UntypedInputError(f"{what} has an undefined element type")
        if t.shape is None:
            return TensorType(t.dtype, None)
        return TensorType(t.dtype, tuple(d if exact and isinstance(d, int) else None for d in t.shape))
    if isinstance(t, (SequenceType, OptionalType)):
        return type(t)(_free(t.elem, what, exact))
    raise UntypedInputError(f"{what} has an unsupported type {t!r}")


def _opsets(node: Node) -> dict[str, int]:
    root = node.graph
    while root is not None and root.parent is not None:
        root = root.parent
    opsets = dict(root.opset_imports) if root is not None else {}
    if "ai.onnx" in opsets:
        opsets.setdefault("", opsets.pop("ai.onnx"))
    return opsets


def probe_model(nodes: list[Node], exact: bool = False) -> tuple[bytes, dict[str, list[str]]]:
    """ONNX bytes of a model running every node of ``nodes`` on inputs of its
    own (see the module docstring), and each node's named outputs.
    :class:`UntypedInputError` when some input has no usable type."""
    opsets: dict[str, int] = {}
    for n in nodes:
        for k, v in _opsets(n).items():
            opsets[k] = max(opsets.get(k, 0), v)
        opsets[n.domain] = max(opsets.get(n.domain, 0), n.opset or 1)
    g = Graph("probe", opset_imports=opsets)
    outputs: dict[str, list[str]] = {}
    for i, node in enumerate(nodes):
        vmap: dict[int, Value] = {}
        for k, v in enumerate(node.all_inputs()):
            if id(v) in vmap:
                continue
            nv = vmap[id(v)] = _probe_value(v, f"p{i}_{k}", exact)
            if nv.const is not None:
                g.add_initializer(nv)
            else:
                g.inputs.append(nv)
        copy = clone_node(node, vmap, g)
        copy.name = f"probe{i}"
        g.add_node(copy)
        outputs[node.name] = []
        for v in copy.outputs:
            if v.name:
                v.type = None  # OpenVINO infers them
                g.outputs.append(v)
                outputs[node.name].append(v.name)
    return to_onnx(g).SerializeToString(), outputs
