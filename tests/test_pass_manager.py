"""The pass manager's fixed point: a pass runs again only when the graph
changed since it last found nothing; dead-node elimination reaches its own
fixed point in one run; unread initializers are found from the use-def links."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from nnrt_core.ir import Graph, Node, Value
from nnrt_core.ir.dtypes import DataType
from nnrt_core.ir.types import TensorType
from nnrt_core.passes import DeadNodeElimination, PassManager
from nnrt_core.passes.base import Pass, PassContext, PassResult
from nnrt_core.passes.rewrite import GraphEditor
from test_passes import graph_of, make, numpy_ctx, ops

F = TensorProto.FLOAT


class Counting(Pass):
    """Changes the graph (in words only) on the runs listed in ``changes_on``; counts its runs."""

    level = "basic"

    def __init__(self, name: str, changes_on: tuple[int, ...] = (), **flags: bool) -> None:
        self.name, self.changes_on, self.runs = name, changes_on, 0
        for k, v in flags.items():
            setattr(self, k, v)

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        self.runs += 1
        res = self.result()
        if self.runs in self.changes_on:
            res.record(f"{self.name} run {self.runs}")
        return res


def tiny_graph() -> Graph:
    x = Value("x", TensorType(DataType.FLOAT, (2,)))
    y = Value("y", TensorType(DataType.FLOAT, (2,)))
    return Graph(inputs=[x], outputs=[y], nodes=[Node("Relu", [x], [y], name="relu")])


def test_a_pass_that_found_nothing_runs_again_only_after_a_later_change():
    a, b, c = Counting("a", (1,)), Counting("b"), Counting("c", (1,))
    report = PassManager(passes=[a, b, c]).run(tiny_graph())
    # sweep 1: a changes, b finds nothing, c changes; sweep 2: all three again (c's change is newer
    # than what a and b saw, and c is not idempotent), none changes: done
    assert (a.runs, b.runs, c.runs) == (2, 2, 2)
    assert report.iterations == 2
    a, b, c = Counting("a", (1,)), Counting("b"), Counting("c")
    report = PassManager(passes=[a, b, c]).run(tiny_graph())
    assert (a.runs, b.runs, c.runs) == (2, 1, 1)  # b and c ran after a's change and found nothing
    assert report.iterations == 2 and report.rewrites("a") == 1


def test_an_idempotent_pass_is_not_rerun_for_its_own_change():
    a, b = Counting("a"), Counting("b", (1,), idempotent=True)
    PassManager(passes=[a, b]).run(tiny_graph())
    assert (a.runs, b.runs) == (2, 1)
    a, b = Counting("a"), Counting("b", (1,))
    PassManager(passes=[a, b]).run(tiny_graph())
    assert (a.runs, b.runs) == (2, 2)


def test_removing_unread_nodes_reruns_only_passes_that_count_readers():
    counts, blind = Counting("counts"), Counting("blind", counts_readers=False)
    dce = Counting("dce", (1,), idempotent=True, removes_only_unread=True)
    PassManager(passes=[counts, blind, dce]).run(tiny_graph())
    assert (counts.runs, blind.runs, dce.runs) == (2, 1, 1)
    # any other change makes every pass stale
    counts, blind, other = Counting("counts"), Counting("blind", counts_readers=False), Counting("other", (1,))
    PassManager(passes=[counts, blind, other]).run(tiny_graph())
    assert (counts.runs, blind.runs, other.runs) == (2, 2, 2)


def test_sweeps_stay_bounded_by_max_iterations():
    a = Counting("a", (1, 2, 3, 4, 5, 6))
    report = PassManager(passes=[a], max_iterations=3).run(tiny_graph())
    assert a.runs == 3 and report.iterations == 3


def test_builtin_flags_match_what_the_passes_do():
    from nnrt_core.passes import (AffineFolding, CommonSubexpressionElimination, ConstantFolding,
                                  IdentityElimination, ShapeFolding)
    assert DeadNodeElimination.idempotent and DeadNodeElimination.removes_only_unread
    assert ConstantFolding.idempotent and not ConstantFolding.counts_readers
    assert not ShapeFolding.counts_readers and not CommonSubexpressionElimination.counts_readers
    # sole-reader and unread-mask conditions: removing readers can give these new matches
    assert IdentityElimination.counts_readers and AffineFolding.counts_readers


def test_dead_node_elimination_finishes_in_one_run_out_of_order_and_through_subgraphs():
    # a dead If whose branch reads 'inner': its producer is dead only once the If is gone
    then_g = helper.make_graph([helper.make_node("Identity", ["inner"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", F, [2])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", F, [2])])
    nodes = [helper.make_node("Abs", ["x"], ["inner"], name="abs"),
             helper.make_node("If", ["c"], ["unread"], name="if", then_branch=then_g, else_branch=else_g),
             helper.make_node("Neg", ["x"], ["d1"], name="d1"),
             helper.make_node("Exp", ["d1"], ["d2"], name="d2"),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    g = graph_of(make(nodes, [("x", [2]), ("c", [], TensorProto.BOOL)], [("y", [2])]))
    g.nodes.reverse()  # readers before producers: one backwards scan misses the chains
    dne = DeadNodeElimination()
    first = dne.run(g, numpy_ctx())
    assert ops(g) == ["Relu"] and first.nodes_removed == 4
    assert not dne.run(g, numpy_ctx()).changed


def test_unread_initializers_go_but_subgraph_and_output_reads_stay():
    then_g = helper.make_graph([helper.make_node("Identity", ["w_sub"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", F, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["w_out"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", F, [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    inits = [(n, np.ones(2, np.float32)) for n in ("w_sub", "w_out", "w_unread", "w_unread2")]
    g = graph_of(make(nodes, [("c", [], TensorProto.BOOL)], [("y", [2]), ("w_out", [2])], inits))
    assert GraphEditor(g).drop_unread_initializers() == 2
    assert sorted(g.initializers) == ["w_out", "w_sub"]
    # once the If is gone, what only its branches read is unread
    DeadNodeElimination().run(g, PassContext(protected=frozenset()))
    assert [n.op_type for n in g.nodes] == ["If"]  # it writes the graph output y
    g.outputs = [v for v in g.outputs if v.name != "y"]
    assert DeadNodeElimination().run(g).nodes_removed == 1
    assert sorted(g.initializers) == ["w_out"]


def test_constant_folding_reaches_its_fixed_point_in_one_run_out_of_order():
    from nnrt_core.passes import ConstantFolding
    from onnx import numpy_helper
    nodes = [helper.make_node("Neg", ["c"], ["n"], name="neg"),  # reads the Constant written after it
             helper.make_node("Constant", [], ["c"], name="const",
                              value=numpy_helper.from_array(np.arange(3, dtype=np.float32), "c")),
             helper.make_node("Add", ["x", "n"], ["y"], name="add")]
    g = graph_of(make(nodes, [("x", [3])], [("y", [3])]))
    g.nodes[:] = [g.node_by_name(n) for n in ("neg", "const", "add")]  # undo the sort
    cf = ConstantFolding()
    assert cf.run(g, numpy_ctx()).rewrites == 2 and ops(g) == ["Add"]
    np.testing.assert_array_equal(g.initializers["n"].const, -np.arange(3, dtype=np.float32))
    assert not cf.run(g, numpy_ctx()).changed


class ReluToNeg(Pass):
    """Turns the first Relu into a Neg (requires a Relu); counts its runs."""

    level = "basic"
    name = "relu_to_neg"
    requires_ops = (frozenset({"Relu"}),)

    def __init__(self) -> None:
        self.runs = 0

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        self.runs += 1
        res = self.result()
        for n in graph.nodes:
            if n.op_type == "Relu":
                n.op_type = "Neg"
                res.record(f"{n.name} -> Neg")
                break
        return res


class NegToRelu(ReluToNeg):
    name = "neg_to_relu"
    requires_ops = (frozenset({"Neg"}),)

    def run(self, graph: Graph, ctx: PassContext | None = None) -> PassResult:
        self.runs += 1
        res = self.result()
        for n in graph.nodes:
            if n.op_type == "Neg" and n.name == "relu":
                n.op_type = "Sigmoid"
                res.record(f"{n.name} -> Sigmoid")
                break
        return res


def test_op_counts_are_taken_once_when_nothing_changes_and_again_after_a_change():
    """ops_before also feeds the first sweep's requires_ops test; ops_after is a copy of it when no
    pass changed the graph, and is counted again when one did.  A pass whose trigger op is absent
    is skipped, and runs once an earlier pass of the sweep made its op appear."""
    neg = NegToRelu()
    report = PassManager(passes=[neg]).run(tiny_graph())  # no Neg: skipped, graph unchanged
    assert neg.runs == 0 and report.ops_before == report.ops_after == {"Relu": 1}
    assert report.ops_after is not report.ops_before
    relu, neg = ReluToNeg(), NegToRelu()
    report = PassManager(passes=[relu, neg]).run(tiny_graph())
    assert relu.runs == 1 and neg.runs == 1  # Neg made by the first pass: the second one ran
    assert report.ops_before == {"Relu": 1} and report.ops_after == {"Sigmoid": 1}
    assert report.rewrites("relu_to_neg") == 1 and report.rewrites("neg_to_relu") == 1
