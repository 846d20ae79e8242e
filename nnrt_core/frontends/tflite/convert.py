"""A checked TFLite flatbuffer -> nnrt IR ``Model`` (the main subgraph)."""
from __future__ import annotations

import json
from typing import Callable, Mapping, Sequence

import numpy as np

from nnrt_core.errors import ModelLoadError, NnrtError, PluginError, UnsupportedNodeError
from nnrt_core.frontends.tflite.context import QUANTIZED_TYPES, GraphState, OpContext
from nnrt_core.frontends.tflite.dynamic import resolve_shapes
from nnrt_core.frontends.tflite.static_shapes import check_declared_shapes
from nnrt_core.frontends.tflite.ops.fft import check_complex
from nnrt_core.frontends.tflite.ops import Mapper, available_ops, custom_ops, mapper_for, shortcut_for
from nnrt_core.frontends.tflite.ops.registry import Shortcut
from nnrt_core.frontends.tflite.schema import GUARDED_ERRORS, FlatModel, corrupt, guarded
from nnrt_core.frontends.tflite.table import OPERATOR, SUBGRAPH, Table
from nnrt_core.ir import DataType, Graph, Model, Value

__all__ = ["OPSET", "PluginOps", "convert", "unsupported_ops"]

#: the ONNX opset the produced graphs are written against
OPSET = 18
_COMPLEX64 = DataType.COMPLEX64  #: read once: an enum member lookup costs ~0.1 us, here per tensor
#: asked only when custom operators are unclaimed: (plugins' {name: mapper}, problems with their answers)
PluginOps = Callable[[], "tuple[Mapping[str, Mapper], list[str]]"]


def unsupported_ops(flat: FlatModel, subgraph: int = 0,
                    extra: Mapping[str, Mapper] | None = None) -> tuple[list[str], list[str]]:
    """(builtin, custom) operator names of ``subgraph`` that have no mapper
    (custom ones may also be claimed by ``extra``, plugins' mappers)."""
    builtin, custom = set(), set()
    for name, is_custom in set(flat.op_names(flat.subgraph(subgraph))):
        if mapper_for(name, is_custom) is None and not (is_custom and extra and name in extra):
            (custom if is_custom else builtin).add(name)
    return sorted(builtin), sorted(custom)


def _plugin_mappers(flat: FlatModel, plugin_ops: PluginOps | None) -> dict[str, Mapper]:
    """Plugins' mappers, asked for only when custom operators are unclaimed;
    ``UnsupportedNodeError`` when some remain unclaimed or unsupported."""
    builtin, custom = unsupported_ops(flat)
    if not builtin and not custom:
        return {}
    extra: dict[str, Mapper] = {}
    problems: list[str] = []
    if custom and plugin_ops is not None:
        found, problems = plugin_ops()
        extra = {k: v for k, v in found.items() if k in custom}
        custom = [c for c in custom if c not in extra]
    if builtin or custom:
        _refuse(flat, builtin, custom, problems)
    return extra


def _refuse(flat: FlatModel, builtin: list[str], custom: list[str], problems: list[str]) -> None:
    parts = []
    if builtin:
        parts.append(f"builtin operators {builtin} are not mapped (mapped: {', '.join(available_ops())})")
    if custom:
        claimed = custom_ops()
        parts.append(f"custom operators {custom} are not claimed by any plugin (claim one with the "
                     f"nnrt_tflite_custom_ops hook or nnrt_core.frontends.tflite.register_op; "
                     f"claimed: {claimed or 'none'})")
    parts.extend(problems)
    raise UnsupportedNodeError(f"{flat.what}: " + "; ".join(parts))


def convert(flat: FlatModel, plugin_ops: PluginOps | None = None,
            input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """The IR model of ``flat``'s first subgraph; the other subgraphs and the
    signature defs are listed in ``metadata`` (``tflite.subgraphs``, ``tflite.signatures``).
    ``plugin_ops`` supplies plugins' custom-operator mappers (the registry's hook);
    ``input_shapes`` fixes free input dimensions (``dynamic.py``)."""
    extra = _plugin_mappers(flat, plugin_ops)
    sg = flat.subgraph(0)
    tensors = flat.tensors(sg)
    names = flat.subgraph_names()
    graph = Graph(names[0] or "main", opset_imports={"": OPSET})
    with guarded("subgraph inputs and outputs"):
        ins = list(sg.i32s(SUBGRAPH.inputs))
        outs = list(sg.i32s(SUBGRAPH.outputs))
    for t in ins + outs:
        if not 0 <= t < len(tensors):
            raise ModelLoadError(f"subgraph input/output refers to tensor {t}; the subgraph has {len(tensors)}")
    resolved = resolve_shapes(flat, sg, tensors, ins, input_shapes)
    if resolved.tensors is tensors:  # static: the declared shapes are used as they are, so checked
        check_declared_shapes(flat, sg, tensors)
    has_complex = any(t.dtype is _COMPLEX64 for t in resolved.tensors)
    for t in ins + outs if has_complex else ():
        if tensors[t].dtype == DataType.COMPLEX64:
            raise UnsupportedNodeError(f"{tensors[t].desc} is a complex64 graph input or output; complex "
                                       "tensors are supported inside the graph only")
    state = GraphState(flat, graph, resolved.tensors)
    for t, value in resolved.folded.items():  # shape arithmetic folded at import
        state.slots[t].const = value
    ops, op_names, op_io = flat.operators(sg), flat.op_names(sg), flat.operator_io(sg)
    for t in ins:
        _add_input(state, t)
    handlers: dict[tuple[str, bool], tuple[Mapper | None, Shortcut | None]] = {}  #: looked up once per code
    for k, op in enumerate(ops):
        if k in resolved.skip_ops:
            continue
        code = op_names[k]
        handler = handlers.get(code)
        if handler is None:
            mapper = mapper_for(*code)
            short = shortcut_for(mapper) if mapper is not None and not has_complex else None
            handler = handlers[code] = (mapper, short)
        try:  # guarded() per operator, without a context manager's cost
            _map(state, op, k, code, handler, extra, has_complex, op_io[k] if op_io is not None else None)
        except ModelLoadError:
            raise
        except GUARDED_ERRORS as e:
            raise corrupt(f"operator {k}", e) from e
    for t in outs:
        graph.outputs.append(_output(state, t))
    for finish in state.finishers:
        finish()
    meta = {"tflite.subgraphs": json.dumps(names), "tflite.signatures": json.dumps(flat.signatures()),
            "tflite.main_subgraph": names[0]}
    meta.update(state.metadata)
    graph.origin = "tflite"
    return Model(graph=graph, producer_name="tflite", doc=flat.description(), metadata=meta, ir_version=8)


def _map(state: GraphState, op: Table, k: int, code: tuple[str, bool],
         handler: tuple[Mapper | None, Shortcut | None], extra: Mapping[str, Mapper], has_complex: bool,
         io: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> None:
    """Run the mapper of operator ``k`` (``code``: its name, is_custom; ``handler``: its registered
    mapper and shortcut; ``io``: its inputs and outputs when read in bulk) and check it produced every output."""
    name, is_custom = code
    mapper, short = handler
    if io is None:  # read once, for the shortcut and the mapper
        io = op.i32s(OPERATOR.inputs), op.i32s(OPERATOR.outputs)
    if short is not None and short(state, *io):
        return
    ctx = OpContext(state, op, k, name, io)
    if has_complex:
        check_complex(ctx)
    if mapper is not None:
        mapper(ctx)
    else:
        plugin = extra.get(name) if is_custom else None
        assert plugin is not None  # _plugin_mappers
        _plugin_map(plugin, ctx, name)
    slots = state.slots
    for j, t in enumerate(ctx.outputs):
        slot = slots[t] if t >= 0 else None
        if slot is not None and slot.plain is None and slot.nchw is None and not slot.is_const:
            raise ModelLoadError(f"{ctx.desc}: the mapper did not produce output {j}")


def _plugin_map(mapper: Mapper, ctx: OpContext, name: str) -> None:
    """A plugin's mapper: anything it raises beyond nnrt's errors is a ``PluginError``."""
    try:
        mapper(ctx)
    except NnrtError:
        raise
    except (Exception, SystemExit) as e:
        raise PluginError(f"{ctx.desc}: the plugin mapper of custom operator {name!r} raised "
                          f"{type(e).__name__}: {e}") from e


def _add_input(state: GraphState, t: int) -> None:
    slot = state.slots[t]
    info = slot.info
    v = state.new_value(info.name, info.dtype, info.shape)
    state.graph.inputs.append(v)
    if slot.quant is not None and info.dtype in QUANTIZED_TYPES:
        slot.plain = state.dequantized(v, slot.quant, info.shape, f"{info.name}__dq", slot.quant.axis)
    else:
        slot.plain = v


def _output(state: GraphState, t: int) -> Value:
    """The graph output of tensor ``t``: TFLite layout, quantized back when the tensor is."""
    slot = state.slots[t]
    info = slot.info
    v = state.plain(t)
    if slot.quant is not None and info.dtype in QUANTIZED_TYPES:
        v = _requantized(state, v, t)
    if any(o is v for o in state.graph.outputs) or any(i is v for i in state.graph.inputs) or v.const is not None:
        out = state.new_value(info.name + "__out", v.dtype, info.shape)
        return state.add("Identity", [v], f"{info.name}__output", [out])[0]
    holder = state.names.get(info.name)
    if v.name != info.name and not any(i is holder for i in state.graph.inputs):
        if holder is not None:
            holder.name = state.unique(info.name + "__inner")
            state.names[holder.name] = holder
        state.names.pop(v.name, None)
        v.name = info.name
        state.names[v.name] = v
    return v


def _requantized(state: GraphState, v: Value, t: int) -> Value:
    """Quantized output ``t`` from its float value ``v``: the integer value of its
    last QuantizeLinear when ``v`` is (a Transpose of) that pair's DequantizeLinear."""
    slot = state.slots[t]
    info = slot.info
    p = v.producer
    perm = None
    if p is not None and p.op_type == "Transpose":
        perm, p = p.attr("perm"), p.inputs[0].producer
    if p is not None and p.op_type == "DequantizeLinear" and p.inputs[0].dtype == info.dtype:
        q = p.inputs[0]
        if perm is None:
            return q
        out = state.new_value(info.name + "__q_nhwc", info.dtype, info.shape)
        return state.add("Transpose", [q], f"{info.name}__q_to_nhwc", [out], {"perm": list(perm)})[0]
    return state.quantized(v, slot.quant, info.dtype, info.shape, f"{info.name}__q", slot.quant.axis)
