"""Output types of ONNX Runtime's contrib ops (``com.microsoft``), which onnx's
shape inference does not know, of the standard ops in forms ORT accepts
beyond the spec or of a rank onnx's inference does not give
(``STANDARD_RULES``: STFT of a ``[batch, length]`` signal, as Kokoro's
iSTFTNet vocoder feeds it; Reshape to a computed shape of known length, as
DeepFilterNet3's GRU blocks do), and of the nodes downstream of them.

After import, every value behind a contrib node (a transformer optimized by
``onnxruntime.transformers``: EmbedLayerNormalization -> Attention -> MatMul
-> SkipLayerNormalization -> ...) would have no type. :func:`complete_contrib_types`
walks the graph once in order: a contrib node's outputs get the type its rule
below gives (from the input types and attributes, ORT's shape rules), and a
standard node reading a value typed this way is inferred again by onnx's
per-node inference. A type is only filled in where none (or no shape) was
known; anything a rule cannot tell stays unknown, as before.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from nnrt_core.frontends.onnx.schemas import onnx_schema
from nnrt_core.frontends.onnx.shapes import infer_node_types
from nnrt_core.ir import DataType, Graph, Node, TensorType, ValueType
from nnrt_core.logs import get_logger

__all__ = ["complete_contrib_types", "CONTRIB_RULES", "STANDARD_RULES"]

log = get_logger("nnrt.onnx")
MS = "com.microsoft"
_MAX_DATA = 4096  # constant inputs handed to per-node inference (shape-like tensors)

Dims = tuple
Rule = Callable[[Node, list], list]


def _t(v) -> TensorType | None:
    return v.type if v is not None and isinstance(v.type, TensorType) and v.type.shape is not None else None


def _inputs(node: Node) -> list[TensorType | None]:
    return [_t(v) for v in node.inputs]


def _same(node: Node, ts: list) -> list:
    return [ts[0]]


def _skip_norm(node: Node, ts: list) -> list:
    return [ts[0], None, None, ts[0]]


def _bcast(a: Dims, b: Dims) -> Dims | None:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _matmul_shape(a: Dims, b: Dims) -> Dims | None:
    if len(a) < 2 or len(b) < 2:
        return None
    batch = _bcast(a[:-2], b[:-2])
    return None if batch is None else batch + (a[-2], b[-1])


def _prep(shape: Dims, trans: bool, trans_batch: bool) -> Dims:
    if trans_batch and len(shape) > 2:
        shape = tuple(shape[1:-1]) + (shape[0], shape[-1])
    if trans and len(shape) >= 2:
        shape = tuple(shape[:-2]) + (shape[-1], shape[-2])
    return tuple(shape)


def _fused_matmul(node: Node, ts: list) -> list:
    a, b = ts[0], ts[1]
    if a is None or b is None:
        return [None]
    shape = _matmul_shape(_prep(a.shape, bool(node.attr("transA", 0)), bool(node.attr("transBatchA", 0))),
                          _prep(b.shape, bool(node.attr("transB", 0)), bool(node.attr("transBatchB", 0))))
    return [None if shape is None else TensorType(a.dtype, shape)]


def _int_matmul(dtype_of: int | None) -> Rule:
    def rule(node: Node, ts: list) -> list:
        a, b = ts[0], ts[1]
        dt = DataType.FLOAT if dtype_of is None else (ts[dtype_of].dtype if ts[dtype_of] is not None else None)
        shape = None if a is None or b is None or dt is None else _matmul_shape(a.shape, b.shape)
        return [None if shape is None else TensorType(dt, shape)]
    return rule


def _attention(node: Node, ts: list) -> list:
    x, w = ts[0], ts[1]
    if x is None or w is None or len(x.shape) != 3 or len(w.shape) != 2:
        return [None]
    sizes = node.attr("qkv_hidden_sizes")
    hv = int(sizes[2]) if sizes is not None else (w.shape[1] // 3 if isinstance(w.shape[1], int) else None)
    return [TensorType(x.dtype, (x.shape[0], x.shape[1], hv))]


def _multi_head_attention(node: Node, ts: list) -> list:
    q = ts[0]
    v = ts[2] if len(ts) > 2 else None
    if q is None or len(q.shape) != 3 or v is None:
        return [None]
    if len(v.shape) == 3:
        hv = v.shape[2]
    elif len(v.shape) == 4 and all(isinstance(d, int) for d in v.shape[1::2]):
        hv = v.shape[1] * v.shape[3]
    else:
        return [None]
    return [TensorType(q.dtype, (q.shape[0], q.shape[1], hv))]


def _embed_layer_norm(node: Node, ts: list) -> list:
    ids, word = ts[0], ts[2]
    if ids is None or word is None or len(ids.shape) != 2 or len(word.shape) != 2:
        return [None]
    out = TensorType(word.dtype, (ids.shape[0], ids.shape[1], word.shape[1]))
    return [out, TensorType(DataType.INT32, (ids.shape[0],)), out]


def _dynamic_quantize_lstm(node: Node, ts: list) -> list:
    x = ts[0]
    h = node.attr("hidden_size")
    if x is None or len(x.shape) != 3 or h is None:
        return [None]
    d = 2 if node.attr("direction", "forward") == "bidirectional" else 1
    state = TensorType(x.dtype, (d, x.shape[1], int(h)))
    return [TensorType(x.dtype, (x.shape[0], d, x.shape[1], int(h))), state, state]


def _const_int(node: Node, k: int) -> int | None:
    v = node.inputs[k] if len(node.inputs) > k else None
    if v is None or v.const is None or v.const.size != 1:
        return None
    return int(v.const.reshape(()))


def _stft(node: Node, ts: list) -> list:
    """STFT of a ``[batch, length]`` signal, which ONNX Runtime accepts (the
    spec, and so onnx's inference, want ``[batch, length, 1 or 2]``):
    ``[batch, frames, bins, 2]``, frames = 1 + (length - frame_length) // step."""
    x = ts[0]
    if x is None or len(x.shape) != 2:
        return [None]
    step = _const_int(node, 1)
    window = ts[2] if len(ts) > 2 else None
    n = _const_int(node, 3)
    if n is None and window is not None and len(window.shape) == 1 and isinstance(window.shape[0], int):
        n = window.shape[0]
    if step is None or step <= 0 or n is None or n <= 0:
        return [None]
    length = x.shape[1]
    frames = 1 + (length - n) // step if isinstance(length, int) else f"{node.name or 'stft'}_frames"
    bins = n // 2 + 1 if int(node.attr("onesided", 1)) else n
    return [TensorType(x.dtype, (x.shape[0], frames, bins, 2))]


def _reshape(node: Node, ts: list) -> list:
    """Reshape to a computed shape (``Concat`` of ``Shape`` parts): the values
    are unknown at load but the shape tensor's length is the output's rank,
    which onnx's inference does not give; each dim a fresh symbol."""
    x, shape = ts[0], ts[1] if len(ts) > 1 else None
    if x is None or shape is None or len(shape.shape) != 1 or not isinstance(shape.shape[0], int):
        return [None]
    base = node.name or "reshape"
    return [TensorType(x.dtype, tuple(f"{base}_d{k}" for k in range(shape.shape[0])))]


#: standard ops in the forms ONNX Runtime accepts beyond the spec, or whose
#: rank is known where onnx's inference gives none; their outputs are untyped otherwise
STANDARD_RULES: dict[str, Rule] = {"STFT": _stft, "Reshape": _reshape}

#: op type -> rule (input types -> output types, None where unknown)
CONTRIB_RULES: dict[str, Rule] = {
    **{op: _same for op in ("FastGelu", "BiasGelu", "QuickGelu", "Gelu", "BiasAdd", "RotaryEmbedding", "Inverse")},
    "SkipLayerNormalization": _skip_norm, "SkipSimplifiedLayerNormalization": _skip_norm,
    "FusedMatMul": _fused_matmul, "TransposeMatMul": _fused_matmul,
    "DynamicQuantizeMatMul": _int_matmul(None), "MatMulIntegerToFloat": _int_matmul(2),
    "Attention": _attention, "MultiHeadAttention": _multi_head_attention,
    "EmbedLayerNormalization": _embed_layer_norm, "DynamicQuantizeLSTM": _dynamic_quantize_lstm,
}


def _unknown(t: ValueType | None) -> bool:
    return t is None or (isinstance(t, TensorType) and t.shape is None)


def _open(t: ValueType | None) -> bool:
    """No type, no shape, or a shape with symbolic dims (which re-inference may resolve)."""
    return _unknown(t) or (isinstance(t, TensorType) and any(not isinstance(d, int) for d in t.shape))


def _refines(old: ValueType | None, new: TensorType) -> bool:
    """``new`` has ``old``'s dtype and rank, every int dim of ``old``, and more int dims."""
    if not isinstance(old, TensorType) or old.shape is None or new.shape is None or old.dtype != new.dtype:
        return False
    if len(old.shape) != len(new.shape):
        return False
    if any(isinstance(a, int) and a != b for a, b in zip(old.shape, new.shape)):
        return False
    count = lambda sh: sum(isinstance(d, int) for d in sh)  # noqa: E731
    return count(new.shape) > count(old.shape)


def _fits(old: ValueType | None, new: TensorType) -> bool:
    return old is None or (isinstance(old, TensorType) and old.dtype in (DataType.UNDEFINED, new.dtype))


def _standard(node: Node, opsets: dict[str, int], constants: dict | None = None) -> Sequence[ValueType | None]:
    """onnx's per-node inference of ``node``, handed the values of constant inputs
    (initializers, and ``Constant`` nodes' values in ``constants``: a Slice of a
    Shape with Constant-node bounds)."""
    schema = onnx_schema(node.op_type, node.domain, node.opset or opsets.get(node.domain, 1))
    if schema is None:
        return []
    types = {v.name: v.type for v in node.inputs if v is not None and isinstance(v.type, TensorType)}
    data = {}
    for v in node.inputs:
        c = None if v is None else v.const if v.const is not None else (constants or {}).get(v.name)
        if c is not None and c.size <= _MAX_DATA and c.dtype != object:
            data[v.name] = c
    try:
        return infer_node_types(schema, node.op_type, node.domain, [v.name if v is not None else "" for v in node.inputs],
                                [o.name for o in node.outputs], list(node.attributes.values()), types, data, opsets)
    except Exception:  # NodeInferenceError or GraphError: the types stay unknown, as before
        return []


def complete_contrib_types(graph: Graph, opsets: dict[str, int]) -> int:
    """Fill in the types behind the contrib nodes of ``graph`` (top level, in
    order); returns how many values got a type."""
    if not any((n.domain == MS and n.op_type in CONTRIB_RULES) or (n.domain in ("", "ai.onnx") and n.op_type in
                                                                    STANDARD_RULES) for n in graph.nodes):
        return 0
    fresh: set[str] = set()
    constants = {n.outputs[0].name: n.attributes["value"].value for n in graph.nodes
                 if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and "value" in n.attributes
                 and n.outputs and isinstance(n.attributes["value"].value, np.ndarray)}
    for node in graph.nodes:
        if not any(o.name and _open(o.type) for o in node.outputs):
            continue
        if node.domain == MS:
            rule = CONTRIB_RULES.get(node.op_type)
            try:
                new = rule(node, _inputs(node)) if rule is not None else []
            except Exception:  # a rule never breaks loading
                new = []
        else:
            new = (list(_standard(node, opsets, constants))
                   if any(v is not None and v.name in fresh for v in node.inputs) else [])
            rule = STANDARD_RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
            if rule is not None and not any(isinstance(t, TensorType) and t.shape is not None for t in new):
                try:  # onnx's inference gave nothing: the rule's rank-level type
                    new = rule(node, _inputs(node))
                except Exception:  # a rule never breaks loading
                    new = []
            if not new:
                continue
        for out, t in zip(node.outputs, new):
            if out.name and isinstance(t, TensorType) and t.shape is not None and (
                    (_unknown(out.type) and _fits(out.type, t)) or _refines(out.type, t)):
                out.type = t
                fresh.add(out.name)
    if fresh:
        log.debug("typed %d values behind contrib ops", len(fresh))
    return len(fresh)
