"""IF -> If: each branch subgraph becomes a sub-graph that captures the operands.

TFLite binds the IF operands (inputs 1..) to the branch subgraph's inputs by
position; here a branch input takes the operand's IR value (captured from the
enclosing graph, as ONNX branches do) or, for a constant operand, its data, so
the branch's mappers see the weights as constants.  A branch refers to no
subgraph it is already inside (no recursion).
"""
from __future__ import annotations

import threading

import numpy as np
import tflite

from nnrt_core.frontends.tflite.context import QUANTIZED_TYPES, GraphState, OpContext
from nnrt_core.frontends.tflite.ops.registry import mapper_for, register
from nnrt_core.frontends.tflite.schema import guarded
from nnrt_core.frontends.tflite.table import OPERATOR, SUBGRAPH, Table
from nnrt_core.ir import Attribute, AttrKind, DataType, Graph, Node, Value

__all__ = ["if_", "branch_graph"]

_ACTIVE = threading.local()  #: subgraph indices being converted on this thread


def branch_graph(ctx: OpContext, index: int, operands: list[int]) -> Graph:
    """The IR sub-graph of subgraph ``index`` with its inputs bound to ``operands`` (tensors of ``ctx``)."""
    flat = ctx.state.flat
    active: set[int] = getattr(_ACTIVE, "stack", set())
    if not 0 < index < flat.n_subgraphs or index in active:
        raise ctx.fail(f"branch subgraph {index} must be another subgraph (1..{flat.n_subgraphs - 1}) "
                       "that is not already being converted")
    with guarded(f"subgraph {index}"):
        sg = flat.subgraph(index)
        tensors = flat.tensors(sg)
        ins = sg.numbers(SUBGRAPH.inputs, np.int32).tolist()
        outs = sg.numbers(SUBGRAPH.outputs, np.int32).tolist()
    if len(ins) != len(operands) or any(not 0 <= t < len(tensors) for t in ins + outs):
        raise ctx.fail(f"subgraph {index} takes {len(ins)} inputs, the operator passes {len(operands)} "
                       "(or it names tensors it does not have)")
    g = Graph(flat.subgraph_names()[index], parent=ctx.state.graph)
    sub = GraphState(flat, g, tensors)
    sub.names, sub.node_names = ctx.state.names, ctx.state.node_names  # names unique across the model
    for t, outer in zip(ins, operands):
        _bind(ctx, sub, t, outer)
    _ACTIVE.stack = active | {index}
    try:
        _convert_ops(ctx, sub, sg, index)
    finally:
        _ACTIVE.stack = active
    for t in outs:
        g.outputs.append(_branch_output(ctx, sub, t))
    return g


def _bind(ctx: OpContext, sub: GraphState, t: int, outer: int) -> None:
    src, dst = ctx.state.slots[outer], sub.slots[t]
    if tuple(src.info.shape) != tuple(dst.info.shape) or src.info.dtype != dst.info.dtype:
        raise ctx.fail(f"operand {src.info.desc} does not match branch input {dst.info.desc}")
    if src.const is not None:
        dst.const, dst.quant = src.const, src.quant
    else:
        dst.plain = ctx.state.plain(outer)


def _convert_ops(ctx: OpContext, sub: GraphState, sg: Table, index: int) -> None:
    for k, op in enumerate(sub.flat.operators(sg)):
        with guarded(f"subgraph {index} operator {k}"):
            name, is_custom = sub.flat.op_codes[op.u32(OPERATOR.opcode_index)]
            mapper = mapper_for(name, is_custom)
            if mapper is None:
                raise ctx.fail(f"branch subgraph {index} uses {'custom ' if is_custom else ''}operator {name}, "
                               "which has no mapper")
            mapper(OpContext(sub, op, k, name))


def _branch_output(ctx: OpContext, sub: GraphState, t: int) -> Value:
    """Branch output of tensor ``t``: an Identity when the value is not computed in the branch."""
    info = sub.info(t)
    if sub.slots[t].quant is not None and info.dtype in QUANTIZED_TYPES:
        raise ctx.fail(f"branch output {info.desc} is quantized (not supported)")
    v = sub.plain(t)
    local = v.producer is not None and any(n is v.producer for n in sub.graph.nodes)
    if not local or any(o is v for o in sub.graph.outputs):
        out = sub.new_value(f"{info.name}__branch_out", v.dtype, info.shape)
        v = sub.add("Identity", [v], f"{info.name}__branch_identity", [out])[0]
    return v


@register("IF")
def if_(ctx: OpContext) -> None:
    o = ctx.options(tflite.IfOptions)
    info = ctx.info(0)
    if info.dtype != DataType.BOOL or len([d for d in info.shape if d != 1]) > 0:
        raise ctx.fail(f"condition must be one BOOL, got {info.dtype.name}{list(info.shape)}")
    operands = ctx.inputs[1:]
    branches = [branch_graph(ctx, int(k), operands) for k in (o.ThenSubgraphIndex(), o.ElseSubgraphIndex())]
    types = [ctx.out_type(j) for j in range(len(ctx.outputs))]
    for g in branches:
        if len(g.outputs) != len(types):
            raise ctx.fail(f"branch {g.name!r} has {len(g.outputs)} outputs, the operator {len(types)}")
    outs = [ctx.state.new_value(f"{ctx.name}__out{j}", d, s) for j, (d, s) in enumerate(types)]
    node = Node("If", [ctx.x(0)], outs, name=ctx.state.unique_node(ctx.name),
                attributes=[Attribute("then_branch", AttrKind.GRAPH, branches[0]),
                            Attribute("else_branch", AttrKind.GRAPH, branches[1])])
    ctx.state.graph.add_node(node)
    for j, v in enumerate(outs):
        ctx.set_out(j, v)
