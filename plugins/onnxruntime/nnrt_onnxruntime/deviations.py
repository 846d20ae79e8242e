"""Known deviations: nodes ORT *loads* but whose results differ from the ONNX
specification (observed on the ONNX node conformance cases, onnxruntime
1.31; ORT's own test suite filters the same cases).

A probe only proves ORT has a kernel; these rules reject nodes whose kernel
is known to disagree with the reference, so they go to the backup backend
instead.  Each rule is narrow (op + the attributes/inputs that trigger it).
Disable with ``backend_options={"onnxruntime": {"known_deviations": False}}``.
"""
from __future__ import annotations

from typing import Callable

from nnrt_core.ir import DataType, Node, TensorType

__all__ = ["RULES", "known_deviation"]


def _present(node: Node, i: int) -> bool:
    return len(node.inputs) > i and node.inputs[i] is not None


def _dtype(node: Node, i: int) -> DataType | None:
    v = node.inputs[i] if len(node.inputs) > i else None
    return v.type.dtype if v is not None and isinstance(v.type, TensorType) else None


def _not_single_element(node: Node, i: int) -> bool:
    v = node.inputs[i]
    shape = v.shape if v is not None else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return True
    n = 1
    for d in shape:
        n *= d
    return n != 1


def _dropout_training(node: Node) -> bool:
    if not _present(node, 2):
        return False
    c = node.inputs[2].const
    if c is not None and c.size:
        return bool(c.reshape(-1)[0])  # a constant training_mode=False is plain inference
    return True


#: (domain, op type, predicate, reason)
RULES: list[tuple[str, str, Callable[[Node], bool], str]] = [
    ("", "DFT", lambda n: True,
     "ORT's FFT leaves ~1e-5 relative noise where the ONNX reference is exactly 0 (beyond conformance tolerance)"),
    ("", "STFT", lambda n: True,
     "ORT's FFT leaves ~1e-5 relative noise where the ONNX reference is exactly 0 (beyond conformance tolerance)"),
    ("", "Resize",
     lambda n: n.attr("coordinate_transformation_mode") == "align_corners" and n.attr("mode", "nearest") != "nearest",
     "ORT's linear/cubic Resize with align_corners differs from the ONNX reference when downsampling"),
    ("", "MaxUnpool", lambda n: _present(n, 2),
     "ORT's MaxUnpool with an output_shape input places values differently from the ONNX reference"),
    ("", "Dropout", _dropout_training,
     "training-mode Dropout is random (ORT's mask differs from the reference RNG)"),
    ("", "ReduceMax", lambda n: _dtype(n, 0) == DataType.BOOL,
     "ORT's boolean ReduceMax fails on empty reductions"),
    ("", "ReduceMin", lambda n: _dtype(n, 0) == DataType.BOOL,
     "ORT's boolean ReduceMin fails on empty reductions"),
    ("", "ConvInteger", lambda n: _present(n, 3) and _not_single_element(n, 3),
     "ORT's ConvInteger only takes a scalar w_zero_point"),
    ("", "Attention", lambda n: _present(n, 6),
     "ORT's Attention does not handle nonpad_kv_seqlen like the ONNX reference"),
    ("", "Attention", lambda n: bool(n.attr("is_causal", 0)) and _present(n, 4),
     "ORT's causal Attention with past key/value masks differently from the ONNX reference"),
    ("", "Attention", lambda n: bool(n.attr("is_causal", 0)) and _dtype(n, 0) == DataType.FLOAT16,
     "ORT's fp16 causal Attention differs from the ONNX reference beyond conformance tolerance"),
]


def known_deviation(node: Node) -> str | None:
    """The reason ``node`` hits a known ORT deviation, else ``None``."""
    for domain, op, pred, reason in RULES:
        if node.op_type == op and node.domain == domain:
            try:
                if pred(node):
                    return f"known onnxruntime deviation: {reason}"
            except Exception:  # a rule must never break placement
                continue
    return None
