"""Nodes declined before any probe: element types this plugin cannot hand
to OpenVINO, and known deviations.

Known deviations are nodes OpenVINO converts and runs but whose results
differ from the ONNX specification, found by the ONNX node conformance cases
(``tests/test_openvino_backend.py``, OpenVINO 2026.4, CPU).  A probe proves
OpenVINO has a conversion and a kernel; these rules decline nodes whose result
is known to disagree, so they go to the backup backend.  Each rule is narrow
(the op and what triggers it) and names a case that found it.  Disable them
with ``backend_options={"openvino": {"known_deviations": False}}``; the
element-type rule stays (it is about the boundary, not the numbers).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnrt_openvino._core import DataType, Node, TensorType

__all__ = ["DEQUANTIZE_CHECK_LIMIT", "EXCHANGED_DTYPES", "LOOP_TRIP_LIMIT", "REQUANTIZERS", "RULES", "dtype_problem",
           "runaway_risk", "known_deviation", "rules_digest"]

#: element types numpy and OpenVINO exchange as they are (bfloat16, float8, int4... come back
#: as another type, e.g. float16 for bfloat16: test_cast_FLOAT_to_BFLOAT16)
EXCHANGED_DTYPES = frozenset({DataType.FLOAT, DataType.FLOAT16, DataType.UINT8, DataType.INT8, DataType.UINT16,
                              DataType.INT16, DataType.INT32, DataType.INT64, DataType.UINT32, DataType.UINT64,
                              DataType.BOOL, DataType.DOUBLE, DataType.STRING})


def _dtypes(node: Node) -> set[DataType]:
    return {v.type.dtype for v in [*node.inputs, *node.outputs] if v is not None and isinstance(v.type, TensorType)}


def dtype_problem(node: Node) -> str | None:
    """Why ``node`` reads or writes an element type this plugin cannot exchange with OpenVINO."""
    bad = sorted(d.name for d in _dtypes(node) if d not in EXCHANGED_DTYPES)
    if bad:
        return f"OpenVINO tensors of type {', '.join(bad)} do not cross the numpy boundary as they are: declined"
    return None


#: the most trips of a Loop this plugin hands to OpenVINO
LOOP_TRIP_LIMIT = 1 << 16


def runaway_risk(node: Node) -> str | None:
    """Why a run of ``node`` might not stop at its deadline: OpenVINO's
    ``InferRequest.cancel`` acts between operations, and a Loop is one
    operation, so only Loops with a small constant trip count are taken."""
    if node.op_type != "Loop" or node.domain not in ("", "ai.onnx"):
        return None
    m = node.inputs[0] if node.inputs else None
    trips = None if m is None or m.const is None else np.asarray(m.const).reshape(-1)
    if trips is None or trips.size != 1 or not 0 <= int(trips[0]) <= LOOP_TRIP_LIMIT:
        return (f"a Loop without a constant trip count of at most {LOOP_TRIP_LIMIT} could outlive a deadline "
                "(OpenVINO cancels between operations, and a Loop is one): declined")
    return None


def _attr(node: Node, name: str, default=None):
    return node.attr(name, default)


def _signed(node: Node) -> bool:
    return bool(_dtypes(node) & {DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64})


def _shift_in_range(node: Node) -> bool:
    """The shift amount is a constant in [0, bit width) (BitShift on unsigned types)."""
    v = node.inputs[1] if len(node.inputs) > 1 else None
    t = node.inputs[0].type if node.inputs and node.inputs[0] is not None else None
    if v is None or v.const is None or not isinstance(t, TensorType):
        return False
    width = 8 * np.dtype(t.dtype.numpy).itemsize
    c = np.asarray(v.const)
    return bool(c.size and (c >= 0).all() and (c < width).all())


def _const(node: Node, i: int) -> bool:
    return len(node.inputs) > i and node.inputs[i] is not None and node.inputs[i].const is not None


def _integer(node: Node, i: int) -> bool:
    v = node.inputs[i] if len(node.inputs) > i else None
    return v is not None and isinstance(v.type, TensorType) and np.dtype(v.type.dtype.numpy).kind in "iu"


def _static_zero_dim(node: Node) -> bool:
    v = node.inputs[0] if node.inputs else None
    shape = v.shape if v is not None else None
    return shape is not None and any(d == 0 for d in shape)


#: the most (input value, scale, zero point) triples a DequantizeLinear check evaluates
DEQUANTIZE_CHECK_LIMIT = 1 << 22


def _inexact_dequantize(node: Node) -> bool:
    """OpenVINO's CPU computes DequantizeLinear as ``fma(x, scale, bias)`` with
    ``bias = -zero_point * scale`` rounded to float32 first, where ONNX (and
    ONNX Runtime) round ``(x - zero_point) * scale`` once: True when that moves
    some result (for every value of ``x``'s integer type, or of ``x`` itself
    when it is a constant).  A zero point that is absent or all zeros is exact;
    one computed at run time, a non-float32 scale, a 32-bit input or a check
    over ``DEQUANTIZE_CHECK_LIMIT`` triples is taken as inexact."""
    if not _const(node, 2):
        return len(node.inputs) > 2 and node.inputs[2] is not None  # a run-time zero point: unknown
    zp = np.asarray(node.inputs[2].const)
    if not zp.any():
        return False
    s = np.asarray(node.inputs[1].const) if _const(node, 1) else None
    if s is None or s.dtype != np.float32 or zp.dtype.kind not in "iu" or zp.dtype.itemsize > 2:
        return True
    if _const(node, 0):
        x = np.unique(np.asarray(node.inputs[0].const))
    else:
        info = np.iinfo(zp.dtype)
        x = np.arange(info.min, info.max + 1, dtype=np.int64)
    pairs = np.unique(np.stack([a.ravel() for a in np.broadcast_arrays(s.astype(np.float64), zp.astype(np.float64))],
                               axis=1), axis=0)
    if pairs.shape[0] * x.size > DEQUANTIZE_CHECK_LIMIT:
        return True
    x64 = x.astype(np.float64)[None, :]
    sc, z = pairs[:, :1], pairs[:, 1:]
    exact = ((x64 - z) * sc).astype(np.float32)  # the product is exact in float64: one rounding
    bias = (-z * sc).astype(np.float32).astype(np.float64)
    fused = (x64 * sc + bias).astype(np.float32)  # exact in float64 too (a few dozen bits): one rounding, as fma
    return bool((exact != fused).any())


#: ops that quantize their float input with a scale computed at run time: one ulp in can be one integer out
REQUANTIZERS = frozenset({"DynamicQuantizeLinear", "DynamicQuantizeLSTM", "DynamicQuantizeMatMul"})
#: ops that move values without computing on them (followed from a DequantizeLinear to its real consumers)
_LAYOUT_OPS = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Flatten", "Slice", "Gather",
                         "Concat", "Split", "Expand"})


def _requantized(node: Node, depth: int = 6) -> bool:
    """Some consumer of ``node``'s output, through layout ops only, re-quantizes it at run time."""
    seen, todo = set(), [(v, 0) for v in node.outputs if v is not None]
    while todo:
        value, d = todo.pop()
        for user, _ in value.uses:
            if user.op_type in REQUANTIZERS:
                return True
            if user.op_type in _LAYOUT_OPS and d < depth and id(user) not in seen:
                seen.add(id(user))
                todo.extend((v, d + 1) for v in user.outputs if v is not None)
    return False


#: (domain, op type, predicate, reason naming a conformance case)
RULES: list[tuple[str, str, Callable[[Node], bool], str]] = [
    ("", "*", lambda n: DataType.DOUBLE in _dtypes(n),
     "OpenVINO's CPU plugin computes float64 in float32 (precision lost; test_max_float64)"),
    ("", "BitShift", lambda n: _signed(n) or not _shift_in_range(n),
     "OpenVINO's BitShift differs on signed inputs and shifts outside [0, width) (test_bitshift_right_int8_negative_input, "
     "test_bitshift_left_int8_shift_ge_width)"),
    ("", "DFT", lambda n: True, "OpenVINO's DFT differs in values and onesided shapes (test_dft, test_dft_rfft)"),
    ("", "DynamicQuantizeLinear", lambda n: True,
     "OpenVINO's DynamicQuantizeLinear rounds some halves the other way (test_dynamicquantizelinear)"),
    ("", "RNN", lambda n: _attr(n, "layout", 0) == 1, "OpenVINO's RNN with layout=1 returns Y_h with the wrong shape "
     "(test_simple_rnn_batchwise)"),
    ("", "GRU", lambda n: _attr(n, "layout", 0) == 1, "OpenVINO's GRU with layout=1 returns Y_h with the wrong shape "
     "(test_gru_batchwise)"),
    ("", "LSTM", lambda n: _attr(n, "layout", 0) == 1 or (len(n.inputs) > 7 and n.inputs[7] is not None),
     "OpenVINO's LSTM with layout=1 or peepholes differs (test_lstm_batchwise, test_lstm_with_peepholes)"),
    ("", "MaxPool", lambda n: bool(_attr(n, "ceil_mode", 0)),
     "OpenVINO's MaxPool with ceil_mode=1 makes a window ONNX drops (test_maxpool_2d_ceil_output_size_reduce_by_one)"),
    ("", "NonMaxSuppression", lambda n: True, "OpenVINO's NonMaxSuppression keeps boxes whose IoU equals the "
     "threshold (test_nonmaxsuppression_iou_threshold_boundary)"),
    ("", "ReduceMax", _static_zero_dim, "OpenVINO's ReduceMax of an empty set differs (test_reduce_max_empty_set)"),
    ("", "ReduceMin", _static_zero_dim, "OpenVINO's ReduceMin of an empty set differs (like test_reduce_max_empty_set)"),
    ("", "Resize", lambda n: bool(_attr(n, "antialias", 0)), "OpenVINO's antialiased Resize differs "
     "(test_resize_downsample_scales_linear_antialias)"),
    ("", "Resize", lambda n: _attr(n, "coordinate_transformation_mode") in ("align_corners", b"align_corners")
     and _attr(n, "mode", "nearest") not in ("nearest", b"nearest"),
     "OpenVINO's linear/cubic Resize with align_corners differs (test_resize_downsample_scales_linear_align_corners)"),
    ("", "Resize", lambda n: _attr(n, "mode", "nearest") in ("cubic", b"cubic") and bool(_attr(n, "exclude_outside", 0)),
     "OpenVINO's cubic Resize with exclude_outside differs (test_resize_upsample_scales_cubic_A_n0p5_exclude_outside)"),
    ("", "Resize", lambda n: _attr(n, "keep_aspect_ratio_policy", "stretch") not in ("stretch", b"stretch"),
     "OpenVINO's Resize ignores keep_aspect_ratio_policy (test_resize_upsample_sizes_nearest_not_larger)"),
    ("", "RoiAlign", lambda n: _attr(n, "mode", "avg") in ("max", b"max"),
     "OpenVINO's RoiAlign mode=max differs (test_roialign_mode_max)"),
    ("", "SpaceToDepth", lambda n: _attr(n, "mode", "DCR") in ("CRD", b"CRD"),
     "OpenVINO ignores SpaceToDepth's mode=CRD (test_spacetodepth_crd_mode_example)"),
    ("", "Tile", lambda n: not _const(n, 1), "OpenVINO's Tile with repeats computed at run time returns garbage "
     "(test_tile)"),
    ("", "TopK", lambda n: _integer(n, 0), "OpenVINO orders equal integer values differently from ONNX's lower-index-"
     "first rule (test_top_k_same_values)"),
    ("", "Attention", lambda n: _attr(n, "left_window_size", -1) >= 0 or _attr(n, "right_window_size", -1) >= 0,
     "OpenVINO's Attention ignores left/right_window_size (test_attention_local_window, "
     "test_attention_bidirectional_window)"),
    ("", "Attention", lambda n: bool(_attr(n, "is_causal", 0)) and len(n.inputs) > 4 and n.inputs[4] is not None,
     "OpenVINO's causal Attention with past key/value masks differently "
     "(test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal)"),
    ("", "DequantizeLinear", lambda n: _inexact_dequantize(n) and _requantized(n), "OpenVINO's DequantizeLinear "
     "with a zero point rounds x*scale + (-zero_point*scale), 1 ulp off ONNX's (x - zero_point)*scale for these "
     "scale and zero point, and a run-time quantizer downstream can turn that ulp into another integer "
     "(text2tashkeel's embedding; tests/test_openvino_quantized.py::test_an_inexact_zero_point_goes_to_the_backup)"),
    ("com.microsoft", "DynamicQuantizeLSTM", lambda n: True, "OpenVINO runs com.microsoft::DynamicQuantizeLSTM as a "
     "float LSTM with dequantized weights; ONNX Runtime's op quantizes X and H to uint8 at every step (1e-2 apart: "
     "tests/test_openvino_quantized.py::test_dynamic_quantize_lstm_goes_to_the_backup)"),
    ("com.microsoft", "DynamicQuantizeMatMul", lambda n: True, "OpenVINO runs com.microsoft::DynamicQuantizeMatMul "
     "as a float MatMul with dequantized weights; ONNX Runtime's op quantizes A to uint8 (8e-3 apart: "
     "tests/test_openvino_quantized.py::test_dynamic_quantize_matmul_goes_to_the_backup)"),
    ("", "QuantizeLinear", lambda n: not _const(n, 1), "OpenVINO's QuantizeLinear with a scale computed at run time "
     "rounds some halves the other way (test_dynamicquantizelinear_expanded)"),
    ("", "RandomUniformLike", lambda n: True, "random draws differ from the reference's (test_bernoulli_seed_expanded)"),
    ("", "RandomUniform", lambda n: True, "random draws differ from the reference's (like test_bernoulli_seed_expanded)"),
    ("", "RandomNormalLike", lambda n: True, "random draws differ from the reference's (like test_bernoulli_seed_expanded)"),
    ("", "RandomNormal", lambda n: True, "random draws differ from the reference's (like test_bernoulli_seed_expanded)"),
    ("", "Multinomial", lambda n: True, "random draws differ from the reference's (like test_bernoulli_seed_expanded)"),
    ("", "Bernoulli", lambda n: True, "Bernoulli is random (OpenVINO's draws differ from the reference's; "
     "test_bernoulli_seed)"),
]


def rules_digest() -> str:
    """A short digest of the rules (op types and reasons): part of the backend's
    model-cache fingerprint, so a plan stored before a rule changed is not reused."""
    import hashlib

    text = "\n".join(f"{domain}::{op}: {reason}" for domain, op, _, reason in RULES)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def known_deviation(node: Node) -> str | None:
    """The reason ``node`` hits a known OpenVINO deviation, else ``None``."""
    for domain, op, pred, reason in RULES:
        if op not in ("*", node.op_type) or (domain != node.domain and not (domain == "" and node.domain == "ai.onnx")):
            continue
        try:
            if pred(node):
                return f"known OpenVINO deviation: {reason}"
        except Exception:  # a rule must never break placement
            continue
    return None
