"""The ORT plugin's known-deviation rules: each names the ONNX conformance
cases it was written for, still declines their nodes (so they keep passing
on the backup), and no longer declines the realistic nodes around them."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from nnrt_core.frontends.onnx import load_onnx
from nnrt_onnxruntime.deviations import RULES, known_deviation

F = TensorProto.FLOAT


def _cases() -> dict:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases()}


CASES = _cases()
NAMED = sorted({(rule.op, case) for rule in RULES for case in rule.cases})


def test_every_rule_names_its_cases_and_they_exist():
    for rule in RULES:
        assert rule.cases or rule.op == "ReduceMin", f"{rule.op} rule names no conformance case"
        for case in rule.cases:
            assert case in CASES, f"{rule.op} rule names unknown conformance case {case}"


@pytest.mark.parametrize("op,case", NAMED, ids=[c for _, c in NAMED])
def test_named_conformance_case_is_still_declined(op, case):
    graph = load_onnx(CASES[case].model).graph
    nodes = [n for n in graph.nodes if n.op_type == op]
    assert nodes
    for node in nodes:
        reason = known_deviation(node)
        assert reason is not None and case in reason, f"{case}: {reason}"


def _node(op: str, inputs: list[tuple[str, int, list]], inits: dict[str, np.ndarray], opset: int = 22,
          out_type: int = F, **attrs):
    """The IR node of a one-node model (``inits``: constant inputs)."""
    names = [n for n, _, _ in inputs]
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs if n and n not in inits],
                              [helper.make_tensor_value_info("y", out_type, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return load_onnx(model.SerializeToString(), check=False).graph.nodes[0]


def _stft(shape, step: int, window: int) -> object:
    return _node("STFT", [("x", F, shape), ("step", TensorProto.INT64, []), ("w", F, [window])],
                 {"step": np.array(step, np.int64), "w": np.hanning(window).astype(np.float32)}, opset=17)


def test_realistic_fft_nodes_are_not_declined():
    assert known_deviation(_stft(["batch", "samples"], 256, 1024)) is None  # vocoder, [batch, length]
    assert known_deviation(_stft([1, 16000, 1], 160, 400)) is None
    assert known_deviation(_stft([1, 128, 1], 8, 16)) is not None  # the conformance signature itself
    dft = _node("DFT", [("x", F, [1, 512, 1])], {}, opset=17, axis=1)
    assert known_deviation(dft) is None


def _resize(scales: list[float], mode: str = "linear"):
    return _node("Resize", [("x", F, [1, 3, 8, 8]), ("", F, []), ("scales", F, [4])],
                 {"scales": np.array(scales, np.float32)}, opset=19,
                 coordinate_transformation_mode="align_corners", mode=mode)


def test_resize_align_corners_is_declined_only_when_downsampling():
    assert known_deviation(_resize([1, 1, 2, 2])) is None  # bilinear upsampling (segmentation heads)
    assert known_deviation(_resize([1, 1, 2, 2], "cubic")) is None
    assert known_deviation(_resize([1, 1, 0.5, 0.5])) is not None


def _maxunpool(output_shape: list[int]):
    return _node("MaxUnpool", [("x", F, [1, 1, 2, 2]), ("i", TensorProto.INT64, [1, 1, 2, 2]),
                               ("shape", TensorProto.INT64, [4])],
                 {"shape": np.array(output_shape, np.int64)}, opset=11, kernel_shape=[2, 2], strides=[2, 2])


def test_maxunpool_is_declined_only_for_a_non_default_output_shape():
    assert known_deviation(_maxunpool([1, 1, 4, 4])) is None
    assert known_deviation(_maxunpool([1, 1, 5, 5])) is not None


def _dropout(ratio: float, training: bool):
    return _node("Dropout", [("x", F, [2, 3]), ("r", F, []), ("t", TensorProto.BOOL, [])],
                 {"r": np.array(ratio, np.float32), "t": np.array(training)}, opset=13)


def test_dropout_is_declined_only_when_it_draws():
    assert known_deviation(_dropout(0.5, False)) is None
    assert known_deviation(_dropout(0.0, True)) is None  # keeps every value
    assert known_deviation(_dropout(0.5, True)) is not None


def _reduce(op: str, shape: list):
    return _node(op, [("x", TensorProto.BOOL, shape), ("axes", TensorProto.INT64, [1])],
                 {"axes": np.array([1], np.int64)}, opset=20, out_type=TensorProto.BOOL)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_bool_reductions_are_declined_only_over_an_empty_set(op):
    assert known_deviation(_reduce(op, [2, 3, 4])) is None
    assert known_deviation(_reduce(op, ["batch", "seq", 4])) is None
    assert known_deviation(_reduce(op, [2, 0, 4])) is not None


def test_convinteger_with_a_scalar_weight_zero_point_is_not_declined():
    u8 = TensorProto.UINT8
    node = _node("ConvInteger", [("x", u8, [1, 1, 5, 5]), ("w", u8, [2, 1, 2, 2]), ("xz", u8, []), ("wz", u8, [])],
                 {"w": np.ones((2, 1, 2, 2), np.uint8), "wz": np.array(1, np.uint8)}, opset=10,
                 out_type=TensorProto.INT32)
    assert known_deviation(node) is None


def _attention(causal: int, mask: bool, past: bool, nonpad: bool, dtype: int = F):
    inputs = [("q", dtype, [1, 2, 4, 8]), ("k", dtype, [1, 2, 4, 8]), ("v", dtype, [1, 2, 4, 8]),
              ("mask" if mask else "", dtype, [4, 8 if past else 4]),
              ("pk" if past else "", dtype, [1, 2, 4, 8]), ("pv" if past else "", dtype, [1, 2, 4, 8]),
              ("nonpad" if nonpad else "", TensorProto.INT64, [1])]
    while not inputs[-1][0]:
        inputs.pop()
    return _node("Attention", inputs, {}, opset=24, out_type=dtype, is_causal=causal)


def test_onnx_attention_rules_decline_only_their_combinations():
    assert known_deviation(_attention(1, False, True, False)) is None  # decoder step with a KV cache
    assert known_deviation(_attention(1, True, False, False)) is None
    assert known_deviation(_attention(1, False, False, True)) is None
    assert known_deviation(_attention(1, True, True, False)) is not None
    assert known_deviation(_attention(0, True, False, True)) is not None
    assert known_deviation(_attention(1, False, False, False, TensorProto.FLOAT16)) is not None


def test_a_changed_rule_changes_the_model_cache_fingerprint(monkeypatch):
    """A plan stored in the model cache under other rules placed nodes the rules now decline:
    the rules are part of the backend's cache fingerprint, so such a plan is not reused."""
    from nnrt_onnxruntime import deviations
    from nnrt_onnxruntime.backend import OnnxRuntimeBackend

    backend, rules = OnnxRuntimeBackend(), list(deviations.RULES)
    before = backend.cache_fingerprint()
    assert before["deviation_rules"] == deviations.rules_digest()
    monkeypatch.setattr(deviations, "RULES", rules[1:])  # a rule dropped
    assert backend.cache_fingerprint()["deviation_rules"] != before["deviation_rules"]
    monkeypatch.setattr(deviations, "RULES", [rules[0]._replace(cases=(*rules[0].cases, "test_new_case")), *rules[1:]])
    assert backend.cache_fingerprint()["deviation_rules"] != before["deviation_rules"]  # a rule's cases changed
    monkeypatch.setattr(deviations, "RULES", rules)
    assert backend.cache_fingerprint() == before
