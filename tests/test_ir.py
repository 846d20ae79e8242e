"""IR structure: use-def links, topological order, validation, sub-graphs."""
from __future__ import annotations

import numpy as np
import pytest

from nnrt_core.errors import GraphError
from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, TensorType, Value
from nnrt_core.ir.clone import extract_subgraph


def f32(*shape):
    return TensorType(DataType.FLOAT, shape)


def chain_graph() -> tuple[Graph, list[Node]]:
    x = Value("x", f32(2, 3))
    w = Value("w", const=np.ones((2, 3), np.float32))
    a, b, c = Value("a", f32(2, 3)), Value("b", f32(2, 3)), Value("c", f32(2, 3))
    n1 = Node("Add", [x, w], [a], name="add")
    n2 = Node("Relu", [a], [b], name="relu")
    n3 = Node("Mul", [a, b], [c], name="mul")
    g = Graph("g", inputs=[x], outputs=[c], initializers=[w], nodes=[n1, n2, n3], opset_imports={"": 17})
    return g, [n1, n2, n3]


def test_use_def_links():
    g, (n1, n2, n3) = chain_graph()
    a = n1.outputs[0]
    assert a.producer is n1 and a.output_index == 0
    assert {(n.name, i) for n, i in a.uses} == {("relu", 0), ("mul", 0)}
    assert a.consumers() == [n2, n3]
    assert n1.opset == 17


def test_topological_sort_reorders_and_is_stable():
    g, (n1, n2, n3) = chain_graph()
    g.nodes = [n3, n1, n2]
    g.topological_sort()
    assert [n.name for n in g.nodes] == ["add", "relu", "mul"]
    g.validate()


def test_cycle_detected():
    x = Value("x", f32(1))
    a, b = Value("a"), Value("b")
    n1 = Node("Add", [x, None], [a], name="n1")
    n2 = Node("Relu", [a], [b], name="n2")
    g = Graph("cyc", inputs=[x], outputs=[b], nodes=[n1, n2])
    g.set_input(n1, 1, b)
    with pytest.raises(GraphError, match="cycle"):
        g.topological_sort()


def test_validate_reports_undefined_and_duplicates():
    g, (n1, n2, n3) = chain_graph()
    ghost = Value("ghost", f32(2, 3))
    g.set_input(n2, 0, ghost)
    with pytest.raises(GraphError, match="ghost.*never defined"):
        g.validate()
    g2, _ = chain_graph()
    dup = Value("a", f32(2, 3))
    g2.add_node(Node("Relu", [g2.inputs[0]], [dup], name="again"))
    with pytest.raises(GraphError, match="defined twice"):
        g2.validate()


def test_remove_node_requires_unused_outputs_and_replace_all_uses():
    g, (n1, n2, n3) = chain_graph()
    with pytest.raises(GraphError, match="used by"):
        g.remove_node(n2)
    g.replace_all_uses(n2.outputs[0], n1.outputs[0])
    g.remove_node(n2)
    assert n3.inputs == [n1.outputs[0], n1.outputs[0]]
    g.validate()


def test_subgraph_outer_references_and_extraction():
    x = Value("x", f32(2))
    cond = Value("cond", TensorType(DataType.BOOL, ()))
    y = Value("y", f32(2))
    parent = Graph("main", inputs=[x, cond], opset_imports={"": 17})
    # then-branch reads `y` from the enclosing graph
    t_out = Value("t_out", f32(2))
    then_g = Graph("then", parent=parent)
    then_g.add_node(Node("Relu", [y], [t_out], name="inner_relu"))
    then_g.outputs = [t_out]
    e_out = Value("e_out", f32(2))
    else_g = Graph("else", parent=parent)
    else_g.add_node(Node("Neg", [y], [e_out], name="inner_neg"))
    else_g.outputs = [e_out]
    out = Value("out", f32(2))
    parent.add_node(Node("Neg", [x], [y], name="neg"))
    if_node = Node("If", [cond], [out], name="if",
                   attributes=[Attribute("then_branch", AttrKind.GRAPH, then_g),
                               Attribute("else_branch", AttrKind.GRAPH, else_g)])
    parent.add_node(if_node)
    parent.outputs = [out]
    parent.validate()
    assert parent.has_subgraphs() and not then_g.has_subgraphs()
    assert not Graph("empty").has_subgraphs()
    loops = Graph("loops", nodes=[Node("Loop", [], [Value("o", f32(2))], name="loop", attributes=[
        Attribute("bodies", AttrKind.GRAPHS, [then_g]), Attribute("n", AttrKind.INT, 3)])])
    assert loops.has_subgraphs()  # a GRAPHS attribute counts too
    assert if_node.outer_inputs() == [y]
    assert if_node.all_inputs() == [cond, y]
    # the If node depends on `neg` through its sub-graph: sorting must keep that order
    parent.nodes.reverse()
    parent.topological_sort()
    assert [n.name for n in parent.nodes] == ["neg", "if"]
    sub = extract_subgraph(parent, [if_node], [cond, y], [out], name="part")
    sub.validate()
    inner = sub.nodes[0].attr("then_branch")
    assert inner.parent is sub
    assert inner.nodes[0].inputs[0] is sub.inputs[1]  # remapped to the partition input


def test_extract_subgraph_carries_initializers_without_copy():
    g, (n1, n2, n3) = chain_graph()
    sub = extract_subgraph(g, [n1], [g.inputs[0]], [n1.outputs[0]], name="p0")
    assert list(sub.initializers) == ["w"]
    assert sub.initializers["w"].const is g.initializers["w"].const
    assert sub.opset_imports == {"": 17}
    sub.validate()


def test_datatype_numpy_mapping():
    assert DataType.FLOAT.numpy == np.float32
    assert DataType.from_numpy(np.int64) is DataType.INT64
    assert DataType.from_numpy(np.dtype("U3")) is DataType.STRING
    assert DataType.BFLOAT16.numpy.itemsize == 2
    with pytest.raises(TypeError, match="no nnrt element type"):
        DataType.from_numpy(np.dtype("datetime64[s]"))
