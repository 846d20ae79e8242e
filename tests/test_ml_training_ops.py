"""NumPy-backend kernels outside the default ONNX domain (ai.onnx.ml,
ai.onnx.preview.training, ai.onnx.preview) and Scan-8: behaviour the
conformance cases do not reach, spec violations, and the capability answer."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend import CompileOptions
from nnrt_core.errors import NnrtError, OpError
from nnrt_core.ir import Node, Value
from nnrt_numpy.backend import NumpyBackend
from nnrt_numpy.kernel import REGISTRY, NodeInfo

ML, TRAIN, PREVIEW = "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview"


def kernel(op, domain, opset, n_in=1, n_out=1, **attrs):
    info = NodeInfo(name="k", op_type=op, domain=domain, opset=opset, attrs=attrs, num_inputs=n_in,
                    num_outputs=n_out, input_present=(True,) * n_in)
    cls = REGISTRY.lookup(domain, op, opset)
    assert cls is not None
    return cls(info)


def run_model(nodes, inputs, outputs, feeds, opsets):
    g = h.make_graph(nodes, "g", inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid(d, v) for d, v in opsets.items()], ir_version=10)
    return Session(m, ScheduleConfig(backends=["numpy"])).run(feeds)


# --------------------------------------------------------------- TreeEnsemble
def _trees(**over):
    # tree 0: x0 <= 0.5 ? leaf0 (t0, 1.0) : leaf1 (t1, 2.0); tree 1: one leaf (t0, 4.0)
    attrs = dict(n_targets=3, tree_roots=[0, 1], nodes_modes=np.array([0, 0], np.uint8),
                 nodes_featureids=[0, 0], nodes_splits=np.array([0.5, 0.0]),
                 nodes_truenodeids=[0, 2], nodes_trueleafs=[1, 1],
                 nodes_falsenodeids=[1, 2], nodes_falseleafs=[1, 1],
                 leaf_targetids=[0, 1, 0], leaf_weights=np.array([1.0, 2.0, 4.0]))
    attrs.update(over)
    return kernel("TreeEnsemble", ML, 5, **attrs)


X = np.array([[0.2], [0.9]], np.float32)


@pytest.mark.parametrize("agg,want", [
    (1, [[5, 0, 0], [4, 2, 0]]),        # SUM
    (0, [[2.5, 0, 0], [2, 1, 0]]),      # AVERAGE over the 2 trees
    (2, [[1, 0, 0], [4, 2, 0]]),        # MIN; target 2 is never reached -> 0
    (3, [[4, 0, 0], [4, 2, 0]]),        # MAX
])
def test_tree_ensemble_aggregates(agg, want):
    (y,) = _trees(aggregate_function=agg)(X)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, want)


def test_tree_ensemble_post_transforms_follow_the_spec_numbering():
    s = np.array([[5, 0, 0], [4, 2, 0]], np.float64)
    softmax = np.exp(s) / np.exp(s).sum(1, keepdims=True)
    np.testing.assert_allclose(_trees(post_transform=1)(X)[0], softmax, rtol=1e-6)          # SOFTMAX
    np.testing.assert_allclose(_trees(post_transform=2)(X)[0], 1 / (1 + np.exp(-s)), rtol=1e-6)  # LOGISTIC
    sz = _trees(post_transform=3)(X)[0]                                                       # SOFTMAX_ZERO
    np.testing.assert_allclose(sz, [[1, 0, 0], [np.exp(2) / (np.exp(2) + 1), 1 / (np.exp(2) + 1), 0]], rtol=1e-6)


def test_tree_ensemble_missing_values_and_member_sets():
    te = kernel("TreeEnsemble", ML, 5, n_targets=1, tree_roots=[0],
                nodes_modes=np.array([6], np.uint8), nodes_featureids=[1], nodes_splits=np.array([0.0]),
                nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
                nodes_missing_value_tracks_true=[1], membership_values=np.array([2.0, 7.0, np.nan]),
                leaf_targetids=[0, 0], leaf_weights=np.array([1.0, -1.0]))
    x = np.array([[0, 7], [0, 3], [0, np.nan]], np.float64)
    np.testing.assert_allclose(te(x)[0], [[1], [-1], [1]])


@pytest.mark.parametrize("over,rule", [
    (dict(nodes_featureids=[0]), "same length"),
    (dict(leaf_targetids=[0, 3, 0]), "n_targets"),
    (dict(aggregate_function=7), "aggregate_function"),
    (dict(nodes_modes=np.array([0, 6], np.uint8)), "membership_values"),
    (dict(nodes_truenodeids=[0, 9]), "out of range"),
])
def test_tree_ensemble_rejects_bad_attributes(over, rule):
    with pytest.raises(OpError, match=rf"node 'k' \(TreeEnsemble\).*{rule}"):
        _trees(**over)


# --------------------------------------------------------------- LabelEncoder
def test_label_encoder_numeric_keys_nan_and_repeats():
    le = kernel("LabelEncoder", ML, 2, keys_floats=[1.5, float("nan"), 2.0, 1.5],
                values_int64s=[1, 2, 3, 4], default_int64=-7)
    (y,) = le(np.array([[1.5, np.nan], [2.0, 9.0]], np.float32))
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [[4, 2], [3, -7]])  # the last 1.5 wins; NaN matches NaN


def test_label_encoder_opset1_both_directions():
    le = kernel("LabelEncoder", ML, 1, classes_strings=["a", "b"], default_string="?")
    np.testing.assert_array_equal(le(np.array(["b", "z"], dtype=object))[0], [1, -1])
    np.testing.assert_array_equal(le(np.array([0, 5], np.int64))[0], np.array(["a", "?"], dtype=object))


def test_label_encoder_rules():
    with pytest.raises(OpError, match="exactly one of keys_"):
        kernel("LabelEncoder", ML, 4, keys_strings=["a"], keys_int64s=[1], values_int64s=[1])
    with pytest.raises(OpError, match="same length"):
        kernel("LabelEncoder", ML, 2, keys_strings=["a", "b"], values_int64s=[1])
    le = kernel("LabelEncoder", ML, 2, keys_strings=["a"], values_int64s=[1])
    with pytest.raises(OpError, match="does not match the keys"):
        le(np.array([1], np.int64))


def test_array_feature_extractor_and_binarizer():
    x = np.arange(6, dtype=np.int64)
    np.testing.assert_array_equal(kernel("ArrayFeatureExtractor", ML, 1, 2)(x, np.array([4, 1]))[0], [[4, 1]])
    with pytest.raises(OpError, match="out of range"):
        kernel("ArrayFeatureExtractor", ML, 1, 2)(x, np.array([6]))
    (y,) = kernel("Binarizer", ML, 1, threshold=0.5)(np.array([0.2, 0.7, np.nan], np.float64))
    np.testing.assert_array_equal(y, [0, 1, 0])


# ------------------------------------------------------------------ training
def test_adam_updates_every_tensor():
    r, t = np.array(0.1, np.float32), np.array(3, np.int64)
    xs = [np.array([1.0, -2.0], np.float32), np.array([0.5], np.float32)]
    gs = [np.array([0.3, 0.1], np.float32), np.array([-1.0], np.float32)]
    vs = [np.zeros(2, np.float32), np.array([0.2], np.float32)]
    hs = [np.ones(2, np.float32), np.array([0.1], np.float32)]
    adam = kernel("Adam", TRAIN, 1, 10, 6, alpha=0.8, beta=0.9, norm_coefficient=0.01)
    outs = adam(r, t, *xs, *gs, *vs, *hs)
    for i in range(2):
        g = 0.01 * xs[i] + gs[i]
        v = 0.8 * vs[i] + 0.2 * g
        hh = 0.9 * hs[i] + 0.1 * g * g
        rate = 0.1 * np.sqrt(1 - 0.9 ** 3) / (1 - 0.8 ** 3)
        np.testing.assert_allclose(outs[i], xs[i] - rate * v / (np.sqrt(hh) + 1e-6), rtol=1e-5)
        np.testing.assert_allclose(outs[2 + i], v, rtol=1e-6)
        np.testing.assert_allclose(outs[4 + i], hh, rtol=1e-6)
        assert outs[i].dtype == np.float32


def test_optimizer_rules():
    with pytest.raises(OpError, match=r"node 'k' \(Adagrad\).*3 groups"):
        kernel("Adagrad", TRAIN, 1, 4, 2)
    with pytest.raises(OpError, match="missing required attribute 'mode'"):
        kernel("Momentum", TRAIN, 1, 5, 2, alpha=0.9, beta=0.1, norm_coefficient=0.0)
    with pytest.raises(OpError, match="mode must be"):
        kernel("Momentum", TRAIN, 1, 5, 2, alpha=0.9, beta=0.1, norm_coefficient=0.0, mode="heavy")
    ada = kernel("Adagrad", TRAIN, 1, 5, 2)
    with pytest.raises(OpError, match="must match"):
        ada(np.array(0.1, np.float32), np.array(0, np.int64), np.zeros(2, np.float32),
            np.zeros(3, np.float32), np.zeros(2, np.float32))


# ----------------------------------------------------------------- FlexAttention
def test_flex_attention_gqa_matches_manual_attention():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 4, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    (y,) = kernel("FlexAttention", PREVIEW, 1, 3, scale=0.25)(q, k, v)
    kk, vv = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    s = q @ kk.swapaxes(-1, -2) * 0.25
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(y, (p / p.sum(-1, keepdims=True)) @ vv, rtol=1e-5, atol=1e-6)
    with pytest.raises(OpError, match="multiple of kv_num_heads"):
        kernel("FlexAttention", PREVIEW, 1, 3)(q[:, :3], k, v)
    with pytest.raises(OpError, match="softmax_precision"):
        kernel("FlexAttention", PREVIEW, 1, 3, softmax_precision=int(T.INT32))


# ------------------------------------------------------------------- Scan-8
def test_scan8_batches_sequence_lens_and_reverse():
    body = h.make_graph([h.make_node("Add", ["s", "x"], ["s2"]), h.make_node("Mul", ["s2", "x"], ["y"])], "b",
                        [h.make_tensor_value_info("s", T.FLOAT, [2]), h.make_tensor_value_info("x", T.FLOAT, [2])],
                        [h.make_tensor_value_info("s2", T.FLOAT, [2]), h.make_tensor_value_info("y", T.FLOAT, [2])])
    node = h.make_node("Scan", ["lens", "init", "X"], ["S", "Y"], num_scan_inputs=1, body=body, directions=[1])
    rng = np.random.default_rng(1)
    feeds = {"lens": np.array([4, 2, 0], np.int64), "init": rng.random((3, 2), np.float32),
             "X": rng.random((3, 4, 2), np.float32)}
    out = run_model([node], [h.make_tensor_value_info("lens", T.INT64, [3]),
                             h.make_tensor_value_info("init", T.FLOAT, [3, 2]),
                             h.make_tensor_value_info("X", T.FLOAT, [3, 4, 2])],
                    [h.make_tensor_value_info("S", T.FLOAT, [3, 2]), h.make_tensor_value_info("Y", T.FLOAT, [3, 4, 2])],
                    feeds, {"": 8})
    for b, n in enumerate(feeds["lens"]):
        s, ys = feeds["init"][b], []
        for x in feeds["X"][b, :n][::-1]:
            s = s + x
            ys.append(s * x)
        np.testing.assert_allclose(out["S"][b], s, rtol=1e-6)
        want = np.zeros((4, 2), np.float32)
        want[:n] = ys if ys else want[:0]
        np.testing.assert_allclose(out["Y"][b], want, rtol=1e-6)
    bad = dict(feeds, lens=np.array([5, 1, 1], np.int64))
    with pytest.raises(NnrtError, match="sequence_lens values must be in 0..4"):
        run_model([node], [h.make_tensor_value_info("lens", T.INT64, [3]),
                           h.make_tensor_value_info("init", T.FLOAT, [3, 2]),
                           h.make_tensor_value_info("X", T.FLOAT, [3, 4, 2])],
                  [h.make_tensor_value_info("S", T.FLOAT, [3, 2]), h.make_tensor_value_info("Y", T.FLOAT, [3, 4, 2])],
                  bad, {"": 8})


# ---------------------------------------------------------------- capability
@pytest.mark.parametrize("op,domain,opset,n_in,n_out,supported", [
    ("TreeEnsemble", ML, 5, 1, 1, True),
    ("TreeEnsemble", ML, 4, 1, 1, False),          # opset 5 operator
    ("LabelEncoder", ML, 1, 1, 1, True),
    ("Binarizer", "", 21, 1, 1, False),            # an ai.onnx.ml op in the default domain
    ("Adam", TRAIN, 1, 6, 3, True),
    ("Momentum", "", 21, 5, 2, False),
    ("FlexAttention", PREVIEW, 1, 3, 1, True),
    ("Gradient", TRAIN, 1, 2, 2, False),
    ("Scan", "", 8, 3, 2, True),
    ("Scan", "", 7, 3, 2, False),
])
def test_capability_by_domain_and_opset(op, domain, opset, n_in, n_out, supported):
    node = Node(op, [Value(f"i{i}") for i in range(n_in)], [Value(f"o{i}") for i in range(n_out)],
                name="n", domain=domain, opset=opset)
    reason = NumpyBackend()._supports(node, CompileOptions())
    assert (reason is None) == supported, reason
