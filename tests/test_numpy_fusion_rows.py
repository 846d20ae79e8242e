"""Attention-score chains of the NumPy backend's fusion (nnrt_numpy/fusion_rows.py):
``MatMul -> Div(constant) -> Add(mask broadcast) -> Softmax`` runs as one step and gives the
unfused numbers and ONNX Runtime's; the cases it must not take stay unfused."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from test_numpy_fusion import check, f32, model, run_both


def _scores(opset=17, axis=None, div="d", mask_shape=("B", 1, 1, "T")):
    attrs = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]), helper.make_node("Div", ["s", div], ["sd"]),
             helper.make_node("Add", ["sd", "m"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], **attrs),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    inputs = [("q", ["B", 4, "S", 8]), ("k", ["B", 4, 8, "T"]), ("m", list(mask_shape)), ("v", ["B", 4, "T", 8])]
    return model(nodes, inputs, [("y", ["B", 4, "S", 8])], {"d": np.array(np.sqrt(8), np.float32)}, opset)


def _feeds(b=2, s=16, t=16, masked=True):
    m = np.zeros((b, 1, 1, t), np.float32)
    if masked:
        m[0, ..., t // 2:] = -10000.0  # padding of the first sequence
    return {"q": f32(b, 4, s, 8, lo=-3, hi=3), "k": f32(b, 4, 8, t, lo=-3, hi=3), "m": m, "v": f32(b, 4, t, 8)}


@pytest.mark.parametrize("masked", [False, True])
def test_attention_scores_fuse_into_one_step_and_match_ort(masked) -> None:
    m = _scores()
    feeds = _feeds(masked=masked)
    check(m, feeds, 3)  # Div, Add and Softmax ride on the MatMul
    got, _, prog = run_both(m, feeds)
    labels = [[n.op_type for n in st.chain.nodes] for st in prog.steps if st.chain is not None]
    assert ["MatMul", "Div", "Add", "Softmax"] in labels
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


def test_a_fully_masked_row_and_large_scores() -> None:
    feeds = _feeds()
    feeds["m"][1] = -1e30  # every key of the second sequence masked: the shifted form for its rows
    feeds["q"] *= 40  # scores beyond the unshifted bound
    check(_scores(), feeds, 3, rtol=1e-4)


def test_opset11_softmax_over_the_last_axis_fuses_other_axes_do_not() -> None:
    check(_scores(opset=11, axis=3), _feeds(), 3)
    check(_scores(opset=11), _feeds(), 2)  # axis 1 flattens (B, 4*S*T) rows: not a last-axis tail
    check(_scores(axis=2), _feeds(), 2)


def test_a_divisor_that_is_not_constant_stops_the_chain() -> None:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["s"]), helper.make_node("Div", ["s", "c"], ["y"])]
    m = model(nodes, [("a", [3, 4]), ("b", [4, 5]), ("c", [3, 5])], [("y", [3, 5])], {})
    check(m, {"a": f32(3, 4), "b": f32(4, 5), "c": f32(3, 5, lo=1, hi=2)}, 0)
    m2 = model(nodes[:1] + [helper.make_node("Div", ["s", "c"], ["y"])], [("a", [3, 4]), ("b", [4, 5])],
               [("y", [3, 5])], {"c": f32(5, lo=1, hi=2)})
    check(m2, {"a": f32(3, 4), "b": f32(4, 5)}, 1)  # a constant per-column divisor fuses
    got, want, _ = run_both(m2, {"a": f32(3, 4), "b": f32(4, 5)})
    np.testing.assert_array_equal(got[0], want[0])  # the same division, bit for bit


def test_split_tails_give_the_whole_array_values_bit_for_bit() -> None:
    """A chain's tails in row pieces on two threads (nnrt_numpy/fusion_split.py): bias, GELU,
    residual and a scalar, equal to one whole-array pass; tails a row piece cannot take are refused."""
    from nnrt_numpy import parallel
    from nnrt_numpy.fusion import apply_ops
    from nnrt_numpy.fusion_split import split_tails

    rng = np.random.default_rng(3)
    y = rng.standard_normal((2, 256, 1536)).astype(np.float32)
    res = rng.standard_normal(y.shape).astype(np.float32)
    bias = rng.standard_normal(1536).astype(np.float32)
    ops = [("add", bias), ("gelu",), ("add_in", 1), ("mul", np.float32(0.5))]
    want = apply_ops(ops, y.copy(), (None, res))
    prev = parallel.set_threads(2)
    try:
        got = y.copy()
        assert split_tails(ops, got, (None, res), apply_ops)
        np.testing.assert_array_equal(got, want)
        per_row = [("add", rng.standard_normal((256, 1536)).astype(np.float32))]  # varies along rows
        assert not split_tails(per_row, y.copy(), (None,), apply_ops)
        assert not split_tails([("softmax",)], y.copy(), (None,), apply_ops)
        assert not split_tails(ops, y[:, :8].copy(), (None, res[:, :8]), apply_ops)  # too small to pay
    finally:
        parallel.set_threads(*prev)
