"""Untrusted models: the schema validator refuses attributes and arity that
crash native code (onnx shape inference, ONNX Runtime) before they get there,
ORT declines nodes it would crash on, and NumPy kernels reject bad attributes
with OpError instead of an internal Python error."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend import CompileOptions
from nnrt_core.errors import ExecutionError, ModelLoadError, NnrtError, OpError
from nnrt_core.frontends.onnx import validate_model
from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, TensorType, Value
from nnrt_numpy.kernel import REGISTRY, NodeInfo

INTERNAL = ("ZeroDivisionError", "IndexError", "OverflowError", "TypeError", "AttributeError", "KeyError")


def model(nodes, inputs, outputs, opset=18, initializers=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=9)


def vi(name, elem=T.FLOAT, shape=(2, 3)):
    return h.make_tensor_value_info(name, elem, list(shape) if shape is not None else None)


def refused(m, *words):
    """Session(m) raises ModelLoadError whose message names every word."""
    with pytest.raises(ModelLoadError) as e:
        Session(m, ScheduleConfig(backends=["numpy"]))
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


# ------------------------------------------------------------ crashes of native code
def test_layer_norm_huge_axis_is_refused_before_shape_inference():
    # onnx's shape inference segfaults on this (the process dies) without the validator
    n = h.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=2**63 - 1)
    m = model([n], [vi("x"), vi("s", shape=(3,))], [vi("y")], opset=17)
    msg = refused(m, "'ln'", "LayerNormalization", "'axis'", "[-64, 64)")
    assert str(2**63 - 1) in msg


def test_split_num_outputs_disagreeing_with_outputs_is_refused():
    # onnx's shape inference aborts (SIGABRT) on this without the validator
    n = h.make_node("Split", ["x"], ["a", "b", "c"], name="sp", axis=1, num_outputs=2)
    m = model([n], [vi("x", shape=(2, 6))], [vi("a"), vi("b"), vi("c")])
    refused(m, "'sp'", "'num_outputs'", "3 outputs")


def test_gathernd_negative_batch_dims_is_refused():
    n = h.make_node("GatherND", ["x", "i"], ["y"], name="g", batch_dims=-100)
    m = model([n], [vi("x"), vi("i", T.INT64, (2, 1))], [vi("y", shape=(2, 3))])
    refused(m, "'g'", "'batch_dims'", "[-64, 64)")
    n = h.make_node("GatherND", ["x", "i"], ["y"], name="g", batch_dims=-1)
    refused(model([n], [vi("x"), vi("i", T.INT64, (2, 1))], [vi("y", shape=(2, 3))]), "non-negative")


@pytest.mark.parametrize("attrs, words", [
    ({"strides": [0, 1]}, ["'strides'", ">= 1"]),
    ({"group": 0}, ["'group'", ">= 1"]),
    ({"kernel_shape": [3, -1]}, ["'kernel_shape'", ">= 1"]),
    ({"pads": [1, 1, -1, 0]}, ["'pads'", ">= 0"]),
    ({"pads": [1, 1, 1]}, ["'pads'", "even"]),
    ({"strides": [1, 1, 1], "kernel_shape": [3, 3]}, ["disagree", "strides: 3"]),
    ({"dilations": [2, 1], "strides": [1]}, ["disagree"]),
    ({"dilations": [2**63 - 1, 1]}, ["'dilations'", "at most 2147483647"]),  # overflowed the window arithmetic
    ({"kernel_shape": [3, 2**31]}, ["'kernel_shape'", "at most 2147483647"]),
])
def test_conv_window_attributes_are_checked(attrs, words):
    n = h.make_node("Conv", ["x", "w"], ["y"], name="cv", **attrs)
    m = model([n], [vi("x", shape=(1, 1, 5, 5)), vi("w", shape=(1, 1, 3, 3))], [vi("y", shape=(1, 1, 3, 3))])
    refused(m, "'cv'", "Conv", *words)


def test_arity_is_checked_against_the_schema():
    # the checker refuses these too; the validator also guards the unchecked paths (load_onnx(check=False))
    n = h.make_node("Relu", ["x", "x"], ["y"], name="r")
    with pytest.raises(ModelLoadError, match="'r' \\(Relu\\): has 2 inputs; Relu-14 expects exactly 1"):
        validate_model(model([n], [vi("x")], [vi("y")]))
    n = h.make_node("Add", ["x", "x"], ["y", "z"], name="a")
    with pytest.raises(ModelLoadError, match="'a' \\(Add\\): has 2 outputs"):
        validate_model(model([n], [vi("x")], [vi("y")]))


def test_empty_variadic_input_is_refused():
    # ORT segfaults running a Min whose variadic input has an empty name
    n = h.make_node("Min", ["x", ""], ["y"], name="mn")
    refused(model([n], [vi("x")], [vi("y")]), "'mn'", "input 1", "variadic", "'data_0'")


def test_input_element_types_are_checked_against_the_type_constraints():
    n = h.make_node("Add", ["s", "s"], ["y"], name="add")
    refused(model([n], [vi("s", T.STRING)], [vi("y", T.STRING)]), "'add'", "string", "Add-14")
    n = h.make_node("Add", ["x", "i"], ["y"], name="mix")
    refused(model([n], [vi("x"), vi("i", T.INT64)], [vi("y")]), "'mix'", "int64", "float", "same type")


def test_attribute_of_the_wrong_kind_is_refused():
    n = h.make_node("Flatten", ["x"], ["y"], name="f")
    n.attribute.append(h.make_attribute("axis", [1, 2]))
    m = model([n], [vi("x")], [vi("y", shape=(2, 3))])
    # the checker or the validator: either way a ModelLoadError naming the attribute
    refused(m, "axis")


def test_validation_covers_subgraphs():
    body_node = h.make_node("Split", ["x"], ["a1", "b1", "c1"], name="inner", axis=0, num_outputs=2)
    body = h.make_graph([body_node], "then", [], [vi("a1", shape=(2,)), vi("b1", shape=(2,)), vi("c1", shape=(2,))])
    other = h.make_graph([h.make_node("Identity", ["x"], ["a2"]), h.make_node("Identity", ["x"], ["b2"]),
                          h.make_node("Identity", ["x"], ["c2"])], "else", [],
                         [vi("a2", shape=(6,)), vi("b2", shape=(6,)), vi("c2", shape=(6,))])
    n = h.make_node("If", ["c"], ["o1", "o2", "o3"], name="if", then_branch=body, else_branch=other)
    m = model([n], [vi("c", T.BOOL, ()), vi("x", shape=(6,))],
              [vi("o1", shape=("n",)), vi("o2", shape=("n",)), vi("o3", shape=("n",))])
    refused(m, "'inner'", "'num_outputs'")


def test_ir_models_pass_the_same_checks():
    g = Graph("g", opset_imports={"": 18})
    x = Value("x", TensorType(DataType.FLOAT, (2, 6)))
    g.inputs.append(x)
    outs = [Value(n, TensorType(DataType.FLOAT, None)) for n in "abc"]
    g.add_node(Node("Split", [x], outs, name="sp", attributes=[Attribute("axis", AttrKind.INT, 1),
                                                              Attribute("num_outputs", AttrKind.INT, 2)]))
    g.outputs.extend(outs)
    with pytest.raises(ModelLoadError, match="'sp'.*num_outputs"):
        Session(g, ScheduleConfig(backends=["numpy"]))


def test_valid_models_still_load_and_run():
    n = h.make_node("Conv", ["x", "w"], ["y"], name="cv", strides=[1, 1], pads=[1, 1, 1, 1])
    w = onnx.numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    m = model([n], [vi("x", shape=(1, 1, 4, 4))], [vi("y", shape=(1, 1, 4, 4))], initializers=[w])
    validate_model(m, types=True)
    out = Session(m, ScheduleConfig(backends=["numpy"])).run({"x": np.ones((1, 1, 4, 4), np.float32)})
    assert out["y"].shape == (1, 1, 4, 4) and out["y"][0, 0, 1, 1] == 9


# ------------------------------------------------------------ onnxruntime declines what would crash it
def test_onnxruntime_declines_empty_required_inputs():
    pytest.importorskip("onnxruntime")
    from nnrt_onnxruntime.backend import OnnxRuntimeBackend

    g = Graph("g", opset_imports={"": 17})
    x = Value("x", TensorType(DataType.FLOAT, (2,)))
    g.inputs.append(x)
    y = Value("y", TensorType(DataType.FLOAT, (2,)))
    g.add_node(Node("Min", [x, None], [y], name="mn"))
    s = Value("s", TensorType(DataType.FLOAT, (2,)))
    z = Value("z", TensorType(DataType.FLOAT, (2,)))
    g.add_node(Node("LayerNormalization", [y, None], [z], name="ln"))  # ORT segfaults without Scale too
    g.outputs.append(z)
    cap = OnnxRuntimeBackend().capability(g, CompileOptions())
    assert "mn" not in cap.supported and "ln" not in cap.supported
    assert "input 1 of Min is empty but required" in cap.reason("mn") and "crash" in cap.reason("mn")
    assert "input 1 of LayerNormalization" in cap.reason("ln")


# ------------------------------------------------------------ NumPy kernels: OpError, not internal errors
def kernel(op, opset, n_in, **attrs):
    info = NodeInfo(name="k", op_type=op, domain="", opset=opset, attrs=attrs, num_inputs=n_in, num_outputs=1,
                    input_present=(True,) * n_in)
    return REGISTRY.lookup("", op, opset)(info)


def test_col2im_attribute_lengths():
    k = kernel("Col2Im", 18, 3, pads=[1, 1, 1])
    with pytest.raises(OpError, match="'k' \\(Col2Im\\).*pads"):
        k(np.zeros((1, 4, 9), np.float32), np.array([4, 4]), np.array([2, 2]))


def test_maxunpool_attribute_lengths_and_ranks():
    with pytest.raises(OpError, match="strides"):
        kernel("MaxUnpool", 11, 2, kernel_shape=[2, 2], strides=[2])
    k = kernel("MaxUnpool", 11, 2, kernel_shape=[2, 2], strides=[2, 2])
    with pytest.raises(OpError, match="rank 4"):
        k(np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 2), np.int64))


def test_conv_transpose_short_output_shape():
    k = kernel("ConvTranspose", 11, 2, output_shape=[3])
    with pytest.raises(OpError, match="output_shape"):
        k(np.zeros((1, 1, 3, 3), np.float32), np.zeros((1, 1, 3, 3), np.float32))


def test_nll_loss_weight_shape():
    k = kernel("NegativeLogLikelihoodLoss", 13, 3)
    with pytest.raises(OpError, match="weight"):
        k(np.zeros((2, 3), np.float32), np.array([2, 1]), np.ones(2, np.float32))


def test_onehot_infinite_depth_is_a_clean_error():
    n = h.make_node("OneHot", ["i", "d", "v"], ["y"], name="oh")
    m = model([n], [vi("i", T.INT64, (2,)), vi("d", T.FLOAT, ()), vi("v", T.FLOAT, (2,))], [vi("y", shape=(2, "d"))])
    sess = Session(m, ScheduleConfig(backends=["numpy"]))
    with pytest.raises(NnrtError) as e:
        sess.run({"i": np.array([0, 1]), "d": np.array(np.inf, np.float32), "v": np.array([0, 1], np.float32)})
    assert "'oh'" in str(e.value) and not any(w in str(e.value) for w in INTERNAL), str(e.value)
    assert isinstance(e.value, (ExecutionError, OpError))


# ------------------------------------------------------------ Session(..., isolate=True)
def _small_model():
    n = h.make_node("Relu", ["x"], ["y"], name="r")
    return model([n], [vi("x")], [vi("y")])


def test_isolated_build_turns_a_native_crash_into_model_load_error(monkeypatch):
    import os
    import signal

    from nnrt_core.compiler.isolate import build_isolated

    def crash(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGSEGV)

    with pytest.raises(ModelLoadError, match="crashed an isolated process \\(signal SIGSEGV\\)"):
        build_isolated(crash, _small_model(), ScheduleConfig(backends=["numpy"]), None)


def test_isolated_build_runs_and_reports_the_childs_errors():
    sess = Session(_small_model(), ScheduleConfig(backends=["numpy"]), isolate=True)
    x = np.array([[-1, 2, 3], [4, -5, 6]], np.float32)
    assert np.array_equal(sess.run({"x": x})["y"], np.maximum(x, 0))
    n = h.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=2**63 - 1)
    with pytest.raises(ModelLoadError, match="'ln'.*'axis'"):
        Session(model([n], [vi("x"), vi("s", shape=(3,))], [vi("y")], opset=17),
                ScheduleConfig(backends=["numpy"]), isolate=True)


class _Finalized:
    """Garbage in a reference cycle that says (through ``conn``) when it is finalized."""

    def __init__(self, conn) -> None:
        self.conn, self.me = conn, self

    def __del__(self) -> None:
        self.conn.send("finalized")


def _collect_and_report(conn) -> None:
    import gc
    gc.collect()  # finalizes the parent's garbage unless it was frozen out of this child's collector
    conn.send("done")
    conn.close()


@pytest.mark.parametrize("frozen", [True, False])
def test_a_forked_build_child_does_not_finalize_the_parents_garbage(frozen):
    """``start_forked`` (isolated builds, the fuzzer's children): a forked child's
    collector must leave the parent's objects alone; finalizing an inherited ONNX
    Runtime session there hangs on its worker threads' condition variable."""
    import gc
    import multiprocessing as mp

    from nnrt_core.compiler.isolate import start_forked

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    gc.disable()  # keep the cycle uncollected here until the fork
    try:
        _Finalized(send)
        proc = ctx.Process(target=_collect_and_report, args=(send,), daemon=True)
        start_forked(proc) if frozen else proc.start()
    finally:
        gc.enable()
    heard = []
    while recv.poll(10):
        heard.append(recv.recv())
        if heard[-1] == "done":
            break
    proc.join(5)
    assert heard == (["done"] if frozen else ["finalized", "done"])
    gc.collect()  # the parent's own copy is collected here, as usual
    recv.close()
    send.close()


def test_constant_of_shape_value_must_hold_one_element():
    n = h.make_node("ConstantOfShape", ["s"], ["y"], name="cos",
                    value=onnx.numpy_helper.from_array(np.zeros(0, np.float32), "v"))
    refused(model([n], [vi("s", T.INT64, (2,))], [vi("y", shape=("a", "b"))]), "'cos'", "'value'", "0 elements")


def test_gather_elements_indices_smaller_than_data_and_too_large():
    k = kernel("GatherElements", 13, 2, axis=0)
    data = np.arange(6).reshape(2, 3)
    idx = np.array([[1, 0], [0, 1]])
    assert np.array_equal(k(data, idx)[0], np.array([[3, 1], [0, 4]]))  # ONNX: indices may cover a corner
    with pytest.raises(OpError, match="exceeds data shape"):
        k(data, np.zeros((2, 4), np.int64))


@pytest.mark.parametrize("op", ["LpPool", "GlobalLpPool"])
def test_lp_pools_refuse_non_positive_p(op):
    attrs = {"kernel_shape": [2]} if op == "LpPool" else {}
    with pytest.raises(OpError, match="p must be a positive"):
        kernel(op, 18 if op == "LpPool" else 2, 1, p=0, **attrs)


def test_graph_builder_checks_attributes_before_native_inference():
    from nnrt_core import GraphBuilder
    from nnrt_core.builder.schema import BuilderError

    b = GraphBuilder("g")
    x = b.input("x", "float32", [2, 3])
    s = b.constant(np.ones(3, np.float32))
    with pytest.raises(BuilderError, match="'axis'.*\\[-64, 64\\)"):
        b.op("LayerNormalization", [x, s], {"axis": 2**63 - 1})  # onnx's per-node inference segfaults on it


def test_einsum_equation_must_be_ascii():
    # onnx's einsum inference hangs in native code on non-ASCII equations (no signal interrupts it)
    n = h.make_node("Einsum", ["x"], ["y"], name="es", equation="ij->\u00e9")
    refused(model([n], [vi("x")], [vi("y", shape=(3,))]), "'es'", "'equation'", "ASCII")


def test_tfidf_ngram_indexes_must_match_the_pool():
    # ORT aborts (std::terminate) on this one
    n = h.make_node("TfIdfVectorizer", ["x"], ["y"], name="tf", mode="TF", min_gram_length=1, max_gram_length=2,
                    max_skip_count=0, ngram_counts=[0, 4], pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
                    ngram_indexes=[2, 0, 3, 10**6])
    refused(model([n], [vi("x", T.INT64, (12,))], [vi("y", shape=(7,))], opset=9), "'tf'", "'ngram_indexes'",
            "expected 7")


def test_element_type_attributes_and_unknown_element_types():
    n = h.make_node("EyeLike", ["x"], ["y"], name="eye", dtype=0)
    refused(model([n], [vi("x")], [vi("y")]), "'eye'", "'dtype'", "element type")
    n = h.make_node("Relu", ["x"], ["y"], name="r")
    m = model([n], [vi("x")], [vi("y")])
    m.graph.input[0].type.tensor_type.elem_type = 99
    with pytest.raises(ModelLoadError, match="'x'.*unknown element type 99"):
        Session(m, ScheduleConfig(backends=["numpy"]))


def test_a_sequence_where_a_tensor_is_expected_is_refused():
    n = h.make_node("Gather", ["s", "i"], ["y"], name="ga")
    seq = h.make_tensor_sequence_value_info("s", T.FLOAT, [2])
    refused(model([n], [seq, vi("i", T.INT64, (1,))], [vi("y", shape=(1,))]), "'ga'", "sequence",
            "expects a tensor")


def test_layer_norm_with_an_empty_bias_runs_on_onnxruntime():
    # ORT segfaults on an explicit empty last input of LayerNormalization: the export drops trailing empties
    pytest.importorskip("onnxruntime")
    n = h.make_node("LayerNormalization", ["x", "s", ""], ["y"], name="ln", axis=1)
    m = model([n], [vi("x"), vi("s", shape=(3,))], [vi("y")], opset=17)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.ones(3, np.float32)}
    sess = Session(m, ScheduleConfig(backends=["onnxruntime"], backup="numpy"))
    assert sess.placement["ln"] == "onnxruntime"
    ref = Session(m, ScheduleConfig(backends=["numpy"])).run(feeds)["y"]
    np.testing.assert_allclose(sess.run(feeds)["y"], ref, rtol=1e-5, atol=1e-6)


def test_roi_align_refuses_rois_scaled_out_of_range():
    k = kernel("RoiAlign", 16, 3, spatial_scale=1e30)
    with pytest.raises(OpError, match="spatial_scale"):
        k(np.zeros((1, 1, 4, 4), np.float32), np.array([[0, 0, 2, 2]], np.float32), np.array([0]))


# -- found by the fuzzer (benchmarks/fuzz_models.py, seed 3) -------------------------------------
def test_conv_with_a_scalar_weight_is_a_clear_error_and_falls_back_visibly():
    """Case 1693: an op swapped to Conv whose weight is a scalar constant (was an IndexError)."""
    n = h.make_node("Conv", ["x", "eps"], ["y"], name="cv")
    m = model([n], [vi("x", shape=(1, 1, 4, 4))], [vi("y", shape=("a", "b", "c", "d"))],
              initializers=[h.make_tensor("eps", T.FLOAT, [], [1e-5])], opset=11)
    with pytest.raises(NnrtError) as info:
        Session(m, ScheduleConfig(backends=["numpy"]))
    assert "weight W has shape []; expected rank >= 3" in str(info.value) or \
        isinstance(info.value, ModelLoadError), str(info.value)
    assert not any(word in str(info.value) for word in INTERNAL), str(info.value)


def test_scan_state_of_another_type_than_the_body_declares_is_refused():
    """Case 2672: a STRING state bound to a FLOAT body input (was a TypeError inside Add)."""
    body = h.make_graph([h.make_node("Add", ["s_in", "x_in"], ["s_out"]), h.make_node("Identity", ["s_out"], ["o"])],
                        "body", [vi("s_in", shape=(2,)), vi("x_in", shape=(2,))],
                        [vi("s_out", shape=(2,)), vi("o", shape=(2,))])
    n = h.make_node("Scan", ["init", "x"], ["s", "ys"], body=body, num_scan_inputs=1, name="scan")
    m = model([n], [vi("init", T.STRING, (2,)), vi("x", shape=(3, 2))], [vi("s", T.STRING, (2,)), vi("ys", shape=(3, 2))])
    try:
        sess = Session(m, ScheduleConfig(backends=["numpy"]))
    except ModelLoadError:
        return  # refused at load: as good
    with pytest.raises(ExecutionError, match="sub-graph 'body' input 's_in' is declared float32"):
        sess.run({"init": np.array(["a", "b"], dtype=object), "x": np.ones((3, 2), np.float32)})


def test_roialign_output_over_the_budget_is_refused_before_allocating():
    """Case 9669: output_width 2**31 (was a MemoryError from numpy's allocator)."""
    from nnrt_core.errors import MemoryBudgetError

    n = h.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="ra", output_width=2**31, output_height=5)
    m = model([n], [vi("x", shape=(1, 1, 8, 8)), vi("rois", shape=("R", 4)), vi("bi", T.INT64, ("R",))],
              [vi("y", shape=("R", 1, 5, 2**31))], opset=16)
    sess = Session(m, ScheduleConfig(backends=["numpy"]))
    with pytest.raises(MemoryBudgetError, match="'ra' \\(RoiAlign\\): output of shape \\[3, 1, 5, 2147483648\\]"):
        sess.run({"x": np.ones((1, 1, 8, 8), np.float32), "rois": np.ones((3, 4), np.float32),
                  "bi": np.zeros(3, np.int64)})


# -- found by the fuzzer (seed 5) ------------------------------------------------------------------
def test_dropout_ratio_that_is_not_a_scalar_is_a_clear_error():
    """Case 3418: a tensor bound to Dropout's ratio (was a TypeError from float())."""
    n = h.make_node("Dropout", ["x", "x"], ["y"], name="dp")
    m = model([n], [vi("x", shape=(3, 4))], [vi("y", shape=(3, 4))], opset=13)
    sess = Session(m, ScheduleConfig(backends=["numpy"]))
    with pytest.raises(OpError, match="'dp' \\(Dropout\\): input 'ratio' has shape \\[3, 4\\]; expected a scalar"):
        sess.run({"x": np.full((3, 4), 0.1, np.float32)})


def test_scan_passing_fewer_values_than_the_body_declares_is_refused():
    """Case 7559: a Scan-9 whose state input was dropped (was an AttributeError on None inside Add)."""
    body = h.make_graph([h.make_node("Add", ["s_in", "x_in"], ["s_out"]), h.make_node("Identity", ["s_out"], ["o"])],
                        "body", [vi("s_in", shape=(2,)), vi("x_in", shape=(2,))],
                        [vi("s_out", shape=(2,)), vi("o", shape=(2,))])
    n = h.make_node("Scan", ["x"], ["s", "ys"], body=body, num_scan_inputs=1, name="scan")
    m = model([n], [vi("x", shape=(3, 2))], [vi("s", shape=(2,)), vi("ys", shape=(3, 2))])
    try:
        sess = Session(m, ScheduleConfig(backends=["numpy"]))
    except ModelLoadError as e:
        assert not any(word in str(e) for word in INTERNAL), str(e)
        return
    with pytest.raises(NnrtError) as info:
        sess.run({"x": np.ones((3, 2), np.float32)})
    assert not any(word in str(info.value) for word in INTERNAL), str(info.value)


# -- found by the fuzzer (seed 6) ------------------------------------------------------------------
def test_flag_attributes_must_be_0_or_1():
    """Case 3329: Cast(saturate=2) sent ONNX Runtime into std::bad_alloc and abort."""
    n = h.make_node("Cast", ["x"], ["y"], name="c", to=T.FLOAT16, saturate=2)
    refused(model([n], [vi("x")], [vi("y", T.FLOAT16)], opset=19), "'c' (Cast)", "'saturate' is 2", "0 or 1")
    n = h.make_node("ReduceSum", ["x"], ["y"], name="r", keepdims=-1)
    refused(model([n], [vi("x")], [vi("y", shape=("a", "b"))], opset=11), "'keepdims' is -1")


def test_same_padded_pool_with_a_huge_window_is_refused_before_allocating():
    """Case 1347: SAME_UPPER pads make any window fit; the padded input (88 GB) ran for minutes on
    the NumPy backend and ran the emulator out of host memory."""
    n = h.make_node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[2**31 - 1, 7], auto_pad="SAME_UPPER")
    m = model([n], [vi("x", shape=(1, 1, 5, 5))], [vi("y", shape=(1, 1, 5, 5))], opset=11)
    with pytest.raises(NnrtError, match="padded input") as info:
        Session(m, ScheduleConfig(backends=["npu_emu"], backup="numpy"))
    assert not any(word in str(info.value) for word in INTERNAL), str(info.value)


# -- found by the fuzzer (seed 8) ------------------------------------------------------------------
def test_tfidf_max_skip_count_is_bounded():
    """Case 8861: max_skip_count 2**62 kept ONNX Runtime in a native loop (no deadline can stop it)."""
    n = h.make_node("TfIdfVectorizer", ["x"], ["y"], name="tf", mode="TF", min_gram_length=1, max_gram_length=1,
                    max_skip_count=2**62, ngram_counts=[0], ngram_indexes=[0, 1], pool_int64s=[2, 3])
    refused(model([n], [vi("x", T.INT64, (2, 6))], [vi("y", shape=(2, 2))], opset=9),
            "'tf' (TfIdfVectorizer)", "max_skip_count")


@pytest.mark.parametrize("op, attrs, inputs", [
    ("LRN", {"size": 2**31 + 1}, [vi("x", shape=(1, 3, 4, 4))]),  # case 3976: the padded squares
])
def test_value_sized_work_in_kernels_is_refused_by_the_budget(op, attrs, inputs):
    from nnrt_core.errors import MemoryBudgetError

    n = h.make_node(op, [i.name for i in inputs], ["y"], name="k", **attrs)
    sess = Session(model([n], inputs, [vi("y", shape=(1, 3, 4, 4))], opset=13), ScheduleConfig(backends=["numpy"]))
    with pytest.raises(MemoryBudgetError, match="'k'"):
        sess.run({"x": np.ones((1, 3, 4, 4), np.float32)})


def test_roialign_sampling_grid_over_the_budget_is_refused():
    """Cases 3532 / 8039: sampling_ratio 2**31 or 10**6 (numpy's allocator failed on the grid)."""
    from nnrt_core.errors import MemoryBudgetError

    n = h.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="ra", output_width=2, output_height=2,
                    sampling_ratio=10**6)
    m = model([n], [vi("x", shape=(1, 1, 8, 8)), vi("rois", shape=(1, 4)), vi("bi", T.INT64, (1,))],
              [vi("y", shape=(1, 1, 2, 2))], opset=16)
    sess = Session(m, ScheduleConfig(backends=["numpy"]))
    with pytest.raises(MemoryBudgetError, match="'ra' \\(RoiAlign\\): sampling grid"):
        sess.run({"x": np.ones((1, 1, 8, 8), np.float32), "rois": np.ones((1, 4), np.float32),
                  "bi": np.zeros(1, np.int64)})
