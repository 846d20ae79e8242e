"""FlexAttention (ai.onnx.preview, opset 1): scaled dot-product attention over
rank-4 inputs with optional ``score_mod`` / ``prob_mod`` sub-graphs.

``S = (Q sqrt(scale)) @ (K sqrt(scale))^T`` in the input type (the scale is
split over Q and K, as the ONNX reference does, to keep fp16 products in
range), then ``score_mod``, softmax over the kv axis, ``prob_mod`` and
``P @ V`` in ``softmax_precision`` (float32 for float16 / bfloat16 inputs,
else the input type), cast back to the input type.  Query heads share K/V
heads in contiguous groups (GQA) when ``q_num_heads != kv_num_heads``.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.ir.dtypes import DataType
from nnrt_numpy.kernel import Kernel, NodeInfo, register

PREVIEW = "ai.onnx.preview"


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "V":  # ml_dtypes (bfloat16): multiply in float32, round to the type
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.matmul(a, b)


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name == "bfloat16"


@register
class FlexAttention(Kernel):
    op_type = "FlexAttention"
    domain = PREVIEW
    since_version = 1
    needs_scope = True

    def _setup(self, node: NodeInfo) -> None:
        if node.num_inputs != 3 or not all(node.present(i) for i in range(3)):
            raise self.fail(f"takes exactly three inputs Q, K, V, got {node.num_inputs}")
        scale = node.attr("scale")
        self.scale = None if scale is None else float(scale)
        sp = node.attr("softmax_precision")
        self.softmax_dtype = None
        if sp is not None:
            try:
                dt = DataType(int(sp)).numpy
            except (ValueError, TypeError):
                dt = None
            if dt is None or not _is_float(dt):
                raise self.fail(f"softmax_precision must be a floating-point TensorProto type "
                                f"(FLOAT, FLOAT16, BFLOAT16 or DOUBLE), got {sp}")
            self.softmax_dtype = dt
        self.mods = {}
        for name in ("score_mod", "prob_mod"):
            g = node.attr(name)
            if g is None:
                continue
            runner = node.compile_subgraph(g)
            if len(runner.input_names) != 1 or len(runner.output_names) != 1:
                raise self.fail(f"{name} must take one input and return one output, takes "
                                f"{len(runner.input_names)} and returns {len(runner.output_names)}")
            self.mods[name] = runner

    def _mod(self, name: str, x: np.ndarray, scope: Mapping[str, Any] | None) -> np.ndarray:
        runner = self.mods.get(name)
        if runner is None:
            return x
        y = np.asarray(runner([x], scope)[0])
        if y.shape != x.shape:
            raise self.fail(f"{name} must keep the shape {x.shape} of its input, returned {y.shape}")
        return y.astype(x.dtype, copy=False)

    def __call__(self, q, k, v, scope: Mapping[str, Any] | None = None) -> Sequence[Any]:
        q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            raise self.fail(f"Q, K and V must be rank-4, got {q.shape}, {k.shape}, {v.shape}")
        if not (q.dtype == k.dtype == v.dtype) or not _is_float(q.dtype):
            raise self.fail(f"Q, K and V must share one floating-point type, got {q.dtype}, {k.dtype}, {v.dtype}")
        b, hq, _, e = q.shape
        if k.shape[0] != b or v.shape[0] != b:
            raise self.fail(f"batch sizes differ: Q {b}, K {k.shape[0]}, V {v.shape[0]}")
        if k.shape[3] != e:
            raise self.fail(f"Q and K must share the head size, got {e} and {k.shape[3]}")
        if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
            raise self.fail(f"K {k.shape} and V {v.shape} must share kv_num_heads and kv_sequence_length")
        hkv = k.shape[1]
        if hq != hkv:
            if hkv == 0 or hq % hkv:
                raise self.fail(f"q_num_heads ({hq}) must be a multiple of kv_num_heads ({hkv})")
            k = np.repeat(k, hq // hkv, axis=1)
            v = np.repeat(v, hq // hkv, axis=1)
        scale = self.scale if self.scale is not None else 1.0 / np.sqrt(e)
        root = np.array(np.sqrt(np.float32(scale)), dtype=q.dtype)
        scores = _matmul(q * root, np.swapaxes(k * root, -1, -2))
        ct = self.softmax_dtype
        if ct is None:
            ct = np.dtype(np.float32) if q.dtype.itemsize < 4 else q.dtype
        scores = self._mod("score_mod", scores.astype(ct), scope)
        with np.errstate(invalid="ignore", over="ignore"):
            e_s = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = e_s / e_s.sum(axis=-1, keepdims=True)
        probs = self._mod("prob_mod", probs, scope)
        return (_matmul(probs, v.astype(ct)).astype(v.dtype),)
