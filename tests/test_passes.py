"""Graph passes run before placement: the pass manager, each pass on small
graphs (structure and numerical equality with level none), the CLI view."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError
from nnrt_core.frontends import load_onnx
from nnrt_core.ir import Model
from nnrt_core.passes import (
    LEVELS,
    ActivationFusion,
    AffineFolding,
    CommonSubexpressionElimination,
    DeadNodeElimination,
    IdentityElimination,
    PassContext,
    PassManager,
    ShapeFolding,
    TransposeReshapeCancellation,
    default_passes,
    fold_constants,
)
from nnrt_core.registry import default_registry
from nnrt_core import load_model


def weight_model():
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["w0"], name="make_w",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        helper.make_node("Mul", ["w0", "w0"], ["w"], name="square_w"),
        helper.make_node("RandomNormal", [], ["noise"], name="noise", shape=[2, 3], seed=1.0),
        helper.make_node("Add", ["x", "w"], ["a"], name="add_w"),
        helper.make_node("Mul", ["noise", "a"], ["y"], name="mul_noise"),
    ]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [shape])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_fold_constants_folds_chains_but_not_random_ops():
    g = load_onnx(weight_model()).graph
    n = fold_constants(g, default_registry().backend("numpy").backend)
    assert n == 2
    assert [x.name for x in g.nodes] == ["noise", "add_w", "mul_noise"]
    np.testing.assert_array_equal(g.initializers["w"].const, np.full((2, 3), 0.25, np.float32))
    assert "shape" not in g.initializers and "w0" not in g.initializers  # no longer read
    g.validate()


def test_session_folds_by_default_and_not_at_level_none():
    npu = make_fake_backend("npu", ["Add", "Mul", "RandomNormal"], priority=100)
    reg = make_registry(fake_plugin(npu))
    x = {"x": np.ones((2, 3), np.float32)}
    folded = Session(weight_model(), ScheduleConfig(backends=["npu"]), registry=reg)
    plain = Session(weight_model(), ScheduleConfig(backends=["npu"], optimization_level="none"), registry=reg)
    assert folded.folded_nodes == 2 and plain.folded_nodes == 0
    assert len(folded.placement) == 3 and len(plain.placement) == 5
    assert plain.placement["make_w"] == "numpy"  # the fake npu has no ConstantOfShape
    np.testing.assert_allclose(folded.run(x)["y"], plain.run(x)["y"], rtol=1e-6)


def test_ir_model_given_to_session_is_not_mutated():
    model = load_onnx(weight_model())
    before = [n.name for n in model.graph.nodes]
    Session(model, ScheduleConfig(backends=["numpy"]))
    assert [n.name for n in model.graph.nodes] == before


# ------------------------------------------------------------------ helpers
F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def make(nodes, inputs, outputs, inits=(), opset=17):
    """A ModelProto from (name, shape) inputs/outputs and numpy initializers."""
    def info(spec):
        name, shape, *dt = spec
        return helper.make_tensor_value_info(name, dt[0] if dt else F, shape)
    g = helper.make_graph(nodes, "m", [info(i) for i in inputs], [info(o) for o in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def graph_of(model):
    g = (load_onnx(model) if not isinstance(model, Model) else load_model(model)).graph
    g.topological_sort()
    return g


def ops(graph):
    return [n.op_type for n in graph.nodes]


def numpy_ctx():
    return PassContext(evaluator=default_registry().backend("numpy").backend)


def run_pass(p, model, ctx=None):
    g = graph_of(model)
    r = p.run(g, ctx or numpy_ctx())
    g.validate()
    return g, r


def assert_levels_agree(model, feeds, levels=("basic", "extended", "all"), rtol=1e-5):
    """Every level gives level none's outputs, under the same names."""
    ref = Session(model, ScheduleConfig(backends=["numpy"], optimization_level="none")).run(feeds)
    out = {}
    for level in levels:
        sess = Session(model, ScheduleConfig(backends=["numpy"], optimization_level=level))
        got = sess.run(feeds)
        assert list(got) == list(ref)
        for k in ref:
            np.testing.assert_allclose(got[k], ref[k], rtol=rtol, atol=1e-6, err_msg=f"{k} at {level}")
        out[level] = sess
    return out


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------- pass manager
def test_levels_select_passes():
    names = {lvl: [p.name for p in default_passes(lvl)] for lvl in LEVELS}
    assert names["none"] == []
    assert {"dead_node_elimination", "identity_elimination", "constant_folding", "shape_folding",
            "conv_bn_folding", "common_subexpression_elimination", "qdq_cleanup", "layernorm_fusion"} == set(names["basic"])
    assert set(names["extended"]) - set(names["basic"]) == {"transpose_reshape_cancellation"}
    assert set(names["all"]) - set(names["extended"]) == {"activation_fusion"}
    with pytest.raises(ConfigError, match="optimization level"):
        PassManager("max")


def test_config_accepts_level_names_and_ort_numbers():
    assert ScheduleConfig(optimization_level="Extended").optimization_level == "extended"
    assert [ScheduleConfig(optimization_level=n).optimization_level for n in (0, 1, 2, 99)] == list(LEVELS)
    for bad in ("max", 3, True, None):
        with pytest.raises(ConfigError, match="optimization_level must be one of"):
            ScheduleConfig(optimization_level=bad)


def test_manager_report_and_fixed_point():
    # Identity removal, then Shape folding, then constant folding of what reads the shape
    nodes = [helper.make_node("Identity", ["x"], ["a"], name="id"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Shape", ["r"], ["s"], name="shape"),
             helper.make_node("ReduceProd", ["s"], ["d"], name="prod", keepdims=1),
             helper.make_node("Reshape", ["r", "d"], ["y"], name="reshape")]
    model = make(nodes, [("x", [2, 3])], [("y", [6])])
    g = graph_of(model)
    report = PassManager("basic", validate=True).run(g, numpy_ctx())
    assert ops(g) == ["Relu", "Reshape"]
    assert report.nodes_before == 5 and report.nodes_after == 2
    assert report.rewrites("identity_elimination") == 1 and report.rewrites("shape_folding") == 1
    assert report.rewrites("constant_folding") == 1
    assert report.ops_before["Shape"] == 1 and "Shape" not in report.ops_after
    assert 2 <= report.iterations <= 4
    d = report.to_dict()
    assert d["passes"]["shape_folding"]["notes"] == ["Shape 'shape' = [2, 3]"]
    assert "5 -> 2 nodes" in report.summary()
    np.testing.assert_array_equal(g.initializers["d"].const, [6])
    assert_levels_agree(model, {"x": rand(2, 3)})


def test_session_reports_passes_and_level_none_changes_nothing():
    model = make([helper.make_node("Identity", ["x"], ["a"], name="id"),
                  helper.make_node("Relu", ["a"], ["y"], name="relu")], [("x", [2])], [("y", [2])])
    sess = Session(model, ScheduleConfig(backends=["numpy"]))
    assert sess.pass_report.level == "basic" and list(sess.placement) == ["relu"]
    assert sess.stats()["passes"] == {"level": "basic", "nodes_before": 2, "nodes_after": 1,
                                      "rewrites": {"identity_elimination": 1}}
    plain = Session(model, ScheduleConfig(backends=["numpy"], optimization_level="none"))
    assert list(plain.placement) == ["id", "relu"] and plain.pass_report.passes == {}


def test_pinned_nodes_are_left_alone():
    model = make([helper.make_node("Identity", ["x"], ["a"], name="id"),
                  helper.make_node("Relu", ["a"], ["y"], name="relu")], [("x", [2])], [("y", [2])])
    sess = Session(model, ScheduleConfig(backends=["numpy"], pins={"id": "numpy"}))
    assert list(sess.placement) == ["id", "relu"]


# ------------------------------------------------------------ cleanup passes
def test_identity_dropout_and_same_type_cast_are_bypassed():
    nodes = [helper.make_node("Identity", ["x"], ["a"], name="id"),
             helper.make_node("Dropout", ["a"], ["b", "mask"], name="drop"),   # mask unread
             helper.make_node("Cast", ["b"], ["c"], name="cast", to=F),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    g, r = run_pass(IdentityElimination(), make(nodes, [("x", [2, 2])], [("y", [2, 2])]))
    assert ops(g) == ["Relu"] and g.nodes[0].inputs[0] is g.inputs[0]
    assert r.rewrites == 3 and r.nodes_removed == 3


def test_identity_keeps_graph_output_names():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Identity", ["a"], ["y"], name="id"),      # producer can write "y"
             helper.make_node("Identity", ["x"], ["z"], name="id_in")]   # graph input -> output: kept
    model = make(nodes, [("x", [3])], [("y", [3]), ("z", [3])])
    g, r = run_pass(IdentityElimination(), model)
    assert ops(g) == ["Relu", "Identity"] and g.nodes[0].outputs[0].name == "y"
    assert [v.name for v in g.outputs] == ["y", "z"]
    assert_levels_agree(model, {"x": rand(3)})


def test_training_dropout_and_read_mask_are_kept():
    t = helper.make_tensor("t", TensorProto.BOOL, [], [True])
    nodes = [helper.make_node("Dropout", ["x", "", "t"], ["a"], name="train"),
             helper.make_node("Dropout", ["a"], ["y", "m"], name="mask_read")]
    model = make(nodes, [("x", [4])], [("y", [4]), ("m", [4], TensorProto.BOOL)])
    model.graph.initializer.append(t)
    g, r = run_pass(IdentityElimination(), model)
    assert ops(g) == ["Dropout", "Dropout"] and r.rewrites == 0


def test_dead_nodes_go_but_outputs_and_subgraph_reads_stay():
    then_g = helper.make_graph([helper.make_node("Identity", ["inner"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", F, [2])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", F, [2])])
    nodes = [helper.make_node("Neg", ["x"], ["dead1"], name="dead1"),
             helper.make_node("Exp", ["dead1"], ["dead2"], name="dead2"),
             helper.make_node("Abs", ["x"], ["inner"], name="read_by_if"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    model = make(nodes, [("x", [2]), ("c", [], TensorProto.BOOL)], [("y", [2])])
    g, r = run_pass(DeadNodeElimination(), model)
    assert ops(g) == ["Abs", "If"] and r.nodes_removed == 2
    feeds = {"x": rand(2), "c": np.array(True)}
    assert_levels_agree(model, feeds)
    assert_levels_agree(model, {**feeds, "c": np.array(False)})


def test_identity_read_by_subgraph_is_rewired():
    then_g = helper.make_graph([helper.make_node("Neg", ["a"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", F, [2])])
    else_g = helper.make_graph([], "else", [], [helper.make_tensor_value_info("a", F, [2])])  # outer value as output
    nodes = [helper.make_node("Identity", ["x"], ["a"], name="id"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    model = load_onnx(make(nodes, [("x", [2]), ("c", [], TensorProto.BOOL)], [("y", [2])]), check=False)
    g, r = run_pass(IdentityElimination(), model)
    assert ops(g) == ["If"] and r.rewrites == 1
    assert g.nodes[0].attr("else_branch").outputs[0] is g.inputs[0]
    for c in (True, False):
        assert_levels_agree(model, {"x": rand(2), "c": np.array(c)})


# ----------------------------------------------------------- shape folding
def test_shape_and_size_of_static_values_fold():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Shape", ["r"], ["s"], name="shape", start=1),
             helper.make_node("Size", ["r"], ["n"], name="size"),
             helper.make_node("Shape", ["d"], ["sd"], name="dyn_shape")]
    model = make(nodes, [("x", [2, 3, 4]), ("d", ["N", 3])],
                 [("s", [2], TensorProto.INT64), ("n", [], TensorProto.INT64), ("sd", [2], TensorProto.INT64)])
    g, r = run_pass(ShapeFolding(), model)
    assert ops(g) == ["Relu", "Shape"] and r.rewrites == 2
    np.testing.assert_array_equal(g.initializers["s"].const, [3, 4])
    assert g.initializers["n"].const == 24
    assert_levels_agree(model, {"x": rand(2, 3, 4), "d": rand(5, 3)})


# --------------------------------------------------------- affine folding
def conv_bn_model(conv_bias=True, extra=(), outputs=(("y", [1, 4, 5, 5]),)):
    inits = [("w", rand(4, 3, 3, 3)), ("scale", RNG.uniform(0.5, 1.5, 4).astype(np.float32)),
             ("bias", rand(4)), ("mean", rand(4)), ("var", RNG.uniform(0.5, 1.5, 4).astype(np.float32))]
    if conv_bias:
        inits.append(("b", rand(4)))
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if conv_bias else []), ["c"], name="conv", pads=[1] * 4),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], name="bn",
                              epsilon=1e-3)]
    last = "bn"
    for i, (op, const) in enumerate(extra):
        inits.append((f"k{i}", const))
        nodes.append(helper.make_node(op, [last, f"k{i}"], [f"e{i}"], name=f"{op.lower()}{i}"))
        last = f"e{i}"
    nodes.append(helper.make_node("Relu", [last], ["y"], name="relu"))
    return make(nodes, [("x", [1, 3, 5, 5])], list(outputs), inits)


@pytest.mark.parametrize("conv_bias", [True, False])
def test_conv_bn_folds_into_conv(conv_bias):
    model = conv_bn_model(conv_bias)
    g, r = run_pass(AffineFolding(), model)
    assert ops(g) == ["Conv", "Relu"] and r.rewrites == 1
    conv = g.nodes[0]
    assert conv.outputs[0].name == "bn" and len(conv.inputs) == 3 and conv.inputs[2].const.dtype == np.float32
    assert set(g.initializers) == {conv.inputs[1].name, conv.inputs[2].name}  # old weights dropped
    assert_levels_agree(model, {"x": rand(1, 3, 5, 5)}, rtol=1e-4)


def test_conv_bn_then_per_channel_mul_add_sub_div_fold():
    extra = [("Mul", RNG.uniform(0.5, 1.5, (4, 1, 1)).astype(np.float32)),
             ("Add", rand(1, 4, 1, 1)), ("Sub", rand(4, 1, 1)),
             ("Div", RNG.uniform(0.5, 1.5, (1, 4, 1, 1)).astype(np.float32)), ("Mul", np.float32(2.0))]
    model = conv_bn_model(extra=extra)
    g, r = run_pass(AffineFolding(), model)
    assert ops(g) == ["Conv", "Relu"] and r.rewrites == 6
    assert_levels_agree(model, {"x": rand(1, 3, 5, 5)}, rtol=1e-4)


def test_bn_absorbs_mul_add_without_conv():
    # densenet121's pattern: MaxPool -> BN -> Mul -> Add
    inits = [("scale", RNG.uniform(0.5, 1.5, 4).astype(np.float32)), ("bias", rand(4)), ("mean", rand(4)),
             ("var", RNG.uniform(0.5, 1.5, 4).astype(np.float32)), ("m", rand(4, 1, 1)), ("a", rand(4, 1, 1))]
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], name="pool"),
             helper.make_node("BatchNormalization", ["p", "scale", "bias", "mean", "var"], ["bn"], name="bn"),
             helper.make_node("Mul", ["bn", "m"], ["mul"], name="mul"),
             helper.make_node("Add", ["a", "mul"], ["y"], name="add")]
    model = make(nodes, [("x", [1, 4, 6, 6])], [("y", [1, 4, 5, 5])], inits)
    g, r = run_pass(AffineFolding(), model)
    assert ops(g) == ["MaxPool", "BatchNormalization"] and g.nodes[1].outputs[0].name == "y"
    assert_levels_agree(model, {"x": rand(1, 4, 6, 6)}, rtol=1e-4)


def test_affine_folding_refuses_unsafe_patterns():
    # conv output also a graph output: BN must not fold (the conv value would change)
    model = conv_bn_model(outputs=(("y", [1, 4, 5, 5]), ("c", [1, 4, 5, 5])))
    g, r = run_pass(AffineFolding(), model)
    assert r.rewrites == 0
    # a Mul that is not per-channel (varies over W) and one that broadcasts the output up
    for const in (rand(1, 1, 1, 5), rand(2, 4, 1, 1), rand(1, 1, 4, 1, 1)):
        shape = list(np.broadcast_shapes(const.shape, (1, 4, 5, 5)))
        g, r = run_pass(AffineFolding(), conv_bn_model(extra=[("Mul", const)], outputs=(("y", shape),)))
        assert r.rewrites == 1 and ops(g) == ["Conv", "Mul", "Relu"]
    # c / y is not affine in y
    inits = [("w", rand(4, 3, 1, 1)), ("k", rand(4, 1, 1))]
    model = make([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                  helper.make_node("Div", ["k", "c"], ["y"], name="div")],
                 [("x", [1, 3, 2, 2])], [("y", [1, 4, 2, 2])], inits)
    assert run_pass(AffineFolding(), model)[1].rewrites == 0


# ------------------------------------------------------------------- CSE
def test_cse_merges_duplicates_but_not_random_ops_or_outputs():
    nodes = [helper.make_node("Relu", ["x"], ["r1"], name="r1"),
             helper.make_node("Relu", ["x"], ["r2"], name="r2"),
             helper.make_node("Add", ["r1", "one_a"], ["a1"], name="a1"),
             helper.make_node("Add", ["r2", "one_b"], ["a2"], name="a2"),  # equal small constants
             helper.make_node("Mul", ["a1", "a2"], ["y"], name="mul"),
             helper.make_node("RandomUniformLike", ["x"], ["u1"], name="u1", seed=1.0),
             helper.make_node("RandomUniformLike", ["x"], ["u2"], name="u2", seed=1.0),
             helper.make_node("Add", ["u1", "u2"], ["u"], name="u"),
             helper.make_node("Relu", ["x"], ["z"], name="r3")]  # writes a graph output: kept
    model = make(nodes, [("x", [3])], [("y", [3]), ("u", [3]), ("z", [3])],
                 [("one_a", np.ones(1, np.float32)), ("one_b", np.ones(1, np.float32))])
    g, r = run_pass(CommonSubexpressionElimination(), model)
    assert [n.name for n in g.nodes] == ["r1", "a1", "mul", "u1", "u2", "u", "r3"]
    assert g.node_by_name("mul").inputs[0] is g.node_by_name("mul").inputs[1]
    assert r.rewrites == 2 and "one_b" not in g.initializers


def test_cse_groups_by_cheap_key_but_merges_only_equal_attributes_and_constants():
    """Same op on the same inputs is only a candidate: attributes and small
    constants (by content) still decide; the first of several equal nodes wins."""
    nodes = [helper.make_node("LeakyRelu", ["x"], ["l1"], name="l1", alpha=0.1),
             helper.make_node("LeakyRelu", ["x"], ["l2"], name="l2", alpha=0.2),  # other alpha: kept
             helper.make_node("LeakyRelu", ["x"], ["l3"], name="l3", alpha=0.2),  # = l2
             helper.make_node("LeakyRelu", ["x"], ["l4"], name="l4", alpha=0.1),  # = l1
             helper.make_node("Add", ["x", "c_a"], ["a1"], name="a1"),
             helper.make_node("Add", ["x", "c_b"], ["a2"], name="a2"),  # same shape, other content: kept
             helper.make_node("Add", ["x", "c_c"], ["a3"], name="a3"),  # = a1 by content
             helper.make_node("Sum", ["l1", "l2", "l3", "l4"], ["s1"], name="s1"),
             helper.make_node("Sum", ["a1", "a2", "a3", "s1"], ["y"], name="s2")]
    model = make(nodes, [("x", [3])], [("y", [3])],
                 [("c_a", np.ones(3, np.float32)), ("c_b", np.full(3, 2, np.float32)),
                  ("c_c", np.ones(3, np.float32))])
    g, r = run_pass(CommonSubexpressionElimination(), model)
    assert [n.name for n in g.nodes] == ["l1", "l2", "a1", "a2", "s1", "s2"] and r.rewrites == 3
    s1, s2 = g.node_by_name("s1"), g.node_by_name("s2")
    assert [v.name for v in s1.inputs] == ["l1", "l2", "l2", "l1"]
    assert [v.name for v in s2.inputs] == ["a1", "a2", "a1", "s1"] and "c_c" not in g.initializers


# ----------------------------------------------- transpose/reshape cancellation
def test_transpose_pairs_cancel_or_compose():
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], name="t1", perm=[0, 2, 1]),
             helper.make_node("Transpose", ["t1"], ["t2"], name="t2", perm=[0, 2, 1]),   # cancels t1
             helper.make_node("Transpose", ["t2"], ["t3"], name="t3", perm=[1, 0, 2]),
             helper.make_node("Transpose", ["t3"], ["y"], name="t4", perm=[2, 0, 1])]    # composes with t3
    model = make(nodes, [("x", [2, 3, 4])], [("y", [4, 3, 2])])
    g, r = run_pass(TransposeReshapeCancellation(), model)
    assert ops(g) == ["Transpose"] and g.nodes[0].attr("perm") == [2, 1, 0] and g.nodes[0].outputs[0].name == "y"
    levels = assert_levels_agree(model, {"x": rand(2, 3, 4)})
    assert len(levels["basic"].placement) == 4 and len(levels["extended"].placement) == 1


def test_reshape_chains_merge_and_noop_reshapes_go():
    inits = [("s1", np.array([6, 4], np.int64)), ("s2", np.array([2, 3, 4], np.int64)), ("ax", np.array([0], np.int64))]
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"], name="r1"),
             helper.make_node("Unsqueeze", ["a", "ax"], ["b"], name="u"),
             helper.make_node("Flatten", ["b"], ["c"], name="f", axis=2),           # chain -> Reshape to [6, 4]
             helper.make_node("Relu", ["c"], ["d"], name="relu"),
             helper.make_node("Reshape", ["d", "s1"], ["y"], name="noop")]         # [6,4] -> [6,4]
    model = make(nodes, [("x", [2, 3, 4])], [("y", [6, 4])], inits)
    g, r = run_pass(TransposeReshapeCancellation(), model)
    assert ops(g) == ["Reshape", "Relu"] and g.nodes[1].outputs[0].name == "y"
    np.testing.assert_array_equal(g.nodes[0].inputs[1].const, [6, 4])
    assert_levels_agree(model, {"x": rand(2, 3, 4)})


# ------------------------------------------------------------ activation fusion
def fusion_model():
    inits = [("w", rand(4, 3, 3, 3)), ("b", rand(4)), ("gw", rand(16, 5)), ("gc", rand(5)),
             ("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.5, np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
             helper.make_node("LeakyRelu", ["c"], ["l"], name="leaky", alpha=0.2),
             helper.make_node("Flatten", ["l"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "gw", "gc"], ["g"], name="gemm"),
             helper.make_node("Clip", ["g", "lo", "hi"], ["y"], name="clip")]
    return make(nodes, [("x", [2, 3, 4, 4])], [("y", [2, 5])], inits)


def test_activation_fusion_into_contrib_ops():
    g, r = run_pass(ActivationFusion(), fusion_model())
    assert [n.qualified_op for n in g.nodes] == ["com.microsoft::FusedConv", "Flatten", "com.microsoft::FusedGemm"]
    conv, gemm = g.nodes[0], g.nodes[2]
    assert conv.attr("activation") == "LeakyRelu" and conv.attr("activation_params") == pytest.approx([0.2])
    assert gemm.attr("activation") == "Clip" and (gemm.attr("activation_alpha"), gemm.attr("activation_beta")) == (-0.5, 0.5)
    assert g.opset_imports["com.microsoft"] == 1 and r.nodes_removed == 4 and r.nodes_added == 2
    sessions = assert_levels_agree(fusion_model(), {"x": rand(2, 3, 4, 4)})
    assert len(sessions["basic"].placement) == 5 and len(sessions["all"].placement) == 3


def test_fusion_only_where_the_selected_backends_support_it():
    # an NPU that runs Conv/LeakyRelu/Flatten/Gemm/Clip but not the contrib ops: no fusion
    npu = make_fake_backend("npu", ["Conv", "LeakyRelu", "Flatten", "Gemm", "Clip"], priority=100)
    reg = make_registry(fake_plugin(npu))
    sess = Session(fusion_model(), ScheduleConfig(backends=["npu"], optimization_level="all"), registry=reg)
    assert set(sess.placement.values()) == {"npu"} and len(sess.placement) == 5
    assert sess.pass_report.rewrites("activation_fusion") == 0
    # the supports check sees the fused node and what it replaces
    seen = []
    ctx = PassContext(supports=lambda fused, replaced: seen.append((fused.op_type, [n.op_type for n in replaced])))
    g, r = run_pass(ActivationFusion(), fusion_model(), ctx)
    assert r.rewrites == 0 and seen == [("FusedConv", ["Conv", "LeakyRelu"]), ("FusedGemm", ["Gemm", "Clip"])]


def test_no_fusion_when_the_conv_output_is_read_elsewhere():
    inits = [("w", rand(2, 2, 1, 1))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    model = make(nodes, [("x", [1, 2, 2, 2])], [("y", [1, 2, 2, 2]), ("c", [1, 2, 2, 2])], inits)
    assert run_pass(ActivationFusion(), model)[1].rewrites == 0


# ---------------------------------------------------------------------- CLI
def test_cli_partition_shows_passes(capsys, light_dir):
    import json

    from nnrt_core.tools.cli import main

    model = str(light_dir / "light_squeezenet.onnx")
    assert main(["partition", model, "--backends", "numpy", "--passes", "--optimization-level", "all"]) == 0
    out = capsys.readouterr().out
    assert "optimization level all: 105 -> 39 nodes" in out
    assert "com.microsoft::FusedConv" in out and "activation_fusion" in out
    assert main(["partition", model, "--backends", "numpy", "--passes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["optimization_level"] == "basic"
    assert data["passes"]["nodes_before"] == 105 and data["passes"]["nodes_after"] == 65
    assert data["passes"]["ops_before"]["ConstantOfShape"] == 39 and "ConstantOfShape" not in data["passes"]["ops_after"]


def test_pass_report_survives_session_files(tmp_path):
    model = make([helper.make_node("Identity", ["x"], ["a"], name="id"),
                  helper.make_node("Relu", ["a"], ["y"], name="relu")], [("x", [2])], [("y", [2])])
    sess = Session(model, ScheduleConfig(backends=["numpy"], optimization_level="extended"))
    loaded = Session(sess.save(tmp_path / "m.nnrt"))
    assert loaded.pass_report.to_dict() == sess.pass_report.to_dict()
    assert loaded.stats()["passes"]["rewrites"] == {"identity_elimination": 1}
