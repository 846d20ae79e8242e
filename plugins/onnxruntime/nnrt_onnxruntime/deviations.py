"""Known deviations: nodes ORT *loads* but whose results differ from the ONNX
specification on an ONNX node conformance case (onnxruntime 1.32; ORT's own
test suite filters the same cases).

A probe only proves ORT has a kernel; these rules reject nodes whose kernel
is known to disagree with the reference, so they go to the backup backend
instead.  Each rule names the conformance cases it was written for and is as
narrow as what those cases show (the attributes, input shapes and constant
inputs that trigger the difference), so a real model's node is declined only
where ORT is known to give another answer, never for float noise it shares
with any FFT.  An input that is not constant or a dimension that is not
static counts as "could trigger" only where the rule says so.
Disable with ``backend_options={"onnxruntime": {"known_deviations": False}}``.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from nnrt_core.ir import DataType, Node, TensorType

__all__ = ["Rule", "RULES", "known_deviation", "rules_digest"]


class Rule(NamedTuple):
    """One known deviation: ``applies(node)`` for a node of ``domain::op``."""

    domain: str
    op: str
    applies: Callable[[Node], bool]
    reason: str
    cases: tuple[str, ...]  #: the ONNX conformance cases that show it


def _present(node: Node, i: int) -> bool:
    return len(node.inputs) > i and node.inputs[i] is not None


def _dtype(node: Node, i: int) -> DataType | None:
    v = node.inputs[i] if len(node.inputs) > i else None
    return v.type.dtype if v is not None and isinstance(v.type, TensorType) else None


def _shape(node: Node, i: int) -> tuple[int, ...] | None:
    """The static shape of input ``i``, or None (absent, unknown or symbolic dims)."""
    v = node.inputs[i] if len(node.inputs) > i else None
    shape = v.shape if v is not None else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(shape)


def _const(node: Node, i: int) -> np.ndarray | None:
    v = node.inputs[i] if len(node.inputs) > i else None
    return None if v is None or v.const is None else np.asarray(v.const)


def _const_int(node: Node, i: int) -> int | None:
    c = _const(node, i)
    return int(c.reshape(-1)[0]) if c is not None and c.size == 1 else None


def _not_single_element(node: Node, i: int) -> bool:
    shape = _shape(node, i)
    return shape is None or int(np.prod(shape, dtype=np.int64)) != 1


# -- DFT / STFT: the conformance signals are integer ramps whose exact spectra hold exact zeros; ORT's
# FFT leaves float32 noise there (e.g. 8e-5 on values of 1912, 4e-8 of max|ref|) beyond the cases' absolute
# tolerance of 1e-7. Any FFT in float32 has such noise: a real signal's transform is not declined.
_DFT_CASE_SHAPES = {(1, 10, 10, 1), (1, 10, 10, 2), (1, 6, 10, 2)}


def _dft_case(node: Node) -> bool:
    return _shape(node, 0) in _DFT_CASE_SHAPES and not _present(node, 1)


def _stft_case(node: Node) -> bool:
    """The conformance signal [1, 128, 1] framed by 16 every 8 (step and length may be run-time inputs there)."""
    if _shape(node, 0) != (1, 128, 1) or _const_int(node, 1) not in (None, 8):
        return False
    if _present(node, 3):
        return _const_int(node, 3) in (None, 16)
    return _present(node, 2) and _shape(node, 2) == (16,)


# -- Resize: align_corners linear/cubic differs when downsampling; upsampling passes
def _resize_align_corners_downsampling(node: Node) -> bool:
    if node.attr("coordinate_transformation_mode") != "align_corners" or node.attr("mode", "nearest") == "nearest":
        return False
    scales = _const(node, 2) if _present(node, 2) else None
    if scales is not None and scales.size:
        return bool(np.any(scales < 1))
    sizes, shape = (_const(node, 3) if _present(node, 3) else None), _shape(node, 0)
    if sizes is not None and shape is not None and sizes.size == len(shape):
        return bool(np.any(sizes < np.asarray(shape)))
    return True  # scales/sizes computed at run time: may downsample


# -- MaxUnpool: an output_shape other than the default one places values differently
def _maxunpool_other_output_shape(node: Node) -> bool:
    if not _present(node, 2):
        return False
    wanted, x = _const(node, 2), _shape(node, 0)
    if wanted is None or x is None:
        return True
    kernel = list(node.attr("kernel_shape") or [])
    strides = list(node.attr("strides") or [1] * len(kernel))
    pads = list(node.attr("pads") or [0] * 2 * len(kernel))
    n = len(kernel)
    default = [(x[2 + i] - 1) * strides[i] - pads[i] - pads[n + i] + kernel[i] for i in range(n)]
    return [int(v) for v in wanted.reshape(-1)[2:]] != default


def _dropout_training(node: Node) -> bool:
    if not _present(node, 2):
        return False
    c = node.inputs[2].const
    if c is not None and c.size and not bool(c.reshape(-1)[0]):
        return False  # a constant training_mode=False is plain inference
    ratio = _const(node, 1) if _present(node, 1) else np.array(0.5)
    return ratio is None or float(ratio.reshape(-1)[0]) != 0.0  # ratio 0 keeps every value: deterministic


def _bool_reduction_over_empty_set(node: Node) -> bool:
    if _dtype(node, 0) != DataType.BOOL:
        return False
    shape = _shape(node, 0)
    if shape is None:
        return False  # an empty reduction on run-time shapes fails loudly in ORT, never silently
    axes: Any = _const(node, 1) if _present(node, 1) else node.attr("axes")
    if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
        if node.attr("noop_with_empty_axes", 0):
            return False
        axes = range(len(shape))
    return any(shape[int(a) % len(shape)] == 0 for a in np.asarray(list(axes)).reshape(-1)) if shape else False


def _causal(node: Node) -> bool:
    return bool(node.attr("is_causal", 0))


RULES: list[Rule] = [
    Rule("", "DFT", _dft_case, "ORT's FFT leaves ~1e-7-of-max noise where the reference is exactly 0 (integer ramps)",
         ("test_dft", "test_dft_axis", "test_dft_inverse", "test_dft_rfft", "test_dft_irfft",
          "test_dft_opset19", "test_dft_axis_opset19", "test_dft_inverse_opset19", "test_dft_rfft_opset19",
          "test_dft_irfft_opset19")),
    Rule("", "STFT", _stft_case, "ORT's FFT leaves ~1e-7-of-max noise where the reference is exactly 0 (integer ramp)",
         ("test_stft", "test_stft_with_window")),
    Rule("", "Resize", _resize_align_corners_downsampling,
         "ORT's linear/cubic Resize with align_corners differs from the ONNX reference when downsampling",
         ("test_resize_downsample_scales_linear_align_corners", "test_resize_downsample_scales_cubic_align_corners")),
    Rule("", "MaxUnpool", _maxunpool_other_output_shape,
         "ORT's MaxUnpool with an output_shape other than the default places values differently",
         ("test_maxunpool_export_with_output_shape",)),
    Rule("", "Dropout", _dropout_training, "training-mode Dropout is random (ORT's mask differs from the reference RNG)",
         ("test_training_dropout", "test_training_dropout_default", "test_training_dropout_default_mask",
          "test_training_dropout_mask")),
    Rule("", "ReduceMax", _bool_reduction_over_empty_set, "ORT's boolean ReduceMax fails on empty reductions",
         ("test_reduce_max_empty_set_bool",)),
    Rule("", "ReduceMin", _bool_reduction_over_empty_set,
         "ORT's boolean ReduceMin fails on empty reductions (the kernel of test_reduce_max_empty_set_bool)", ()),
    Rule("", "ConvInteger", lambda n: _present(n, 3) and _not_single_element(n, 3),
         "ORT's ConvInteger only takes a scalar w_zero_point", ("test_convinteger_with_padding",)),
    Rule("", "Attention", lambda n: _present(n, 6) and _present(n, 3),
         "ORT's Attention fails on nonpad_kv_seqlen together with attn_mask",
         ("test_attention_4d_diff_heads_mask4d_padded_kv",)),
    Rule("", "Attention", lambda n: _causal(n) and _present(n, 4) and _present(n, 3),
         "ORT's causal Attention with past key/value and attn_mask masks differently from the ONNX reference",
         ("test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal",
          "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal")),
    Rule("", "Attention", lambda n: _causal(n) and _dtype(n, 0) == DataType.FLOAT16,
         "ORT's fp16 causal Attention differs from the ONNX reference beyond conformance tolerance",
         ("test_attention_4d_causal_fp16",)),
]


def rules_digest() -> str:
    """A short digest of the rules (ops, reasons, cases): part of the backend's
    model-cache fingerprint, so a plan stored before a rule changed is not reused."""
    import xxhash

    text = "\n".join(f"{r.domain}::{r.op}: {r.reason} {r.cases}" for r in RULES)
    return xxhash.xxh3_64_hexdigest(text.encode())


def known_deviation(node: Node) -> str | None:
    """The reason ``node`` hits a known ORT deviation, else ``None``."""
    for rule in RULES:
        if node.op_type == rule.op and node.domain == rule.domain:
            try:
                if rule.applies(node):
                    cases = f" (conformance: {', '.join(rule.cases)})" if rule.cases else ""
                    return f"known onnxruntime deviation: {rule.reason}{cases}"
            except Exception:  # a rule must never break placement
                continue
    return None
