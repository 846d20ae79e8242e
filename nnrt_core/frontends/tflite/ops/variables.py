"""Resource variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE) as explicit state.

Streaming models (microWakeWord's int8 wake-word nets) keep their state in
resource variables that LiteRT holds between invocations.  An nnrt graph is a
pure function, so each variable becomes a graph input ``<name>__state_in``
(read before any assignment) and a graph output ``<name>__state_out`` (its
last assigned value), in the variable's stored type.  The caller carries the
state: it feeds a step's ``__state_out`` values as the next step's
``__state_in``.  CALL_ONCE's initializer subgraph (VAR_HANDLE + ASSIGN_VARIABLE
of constants) is evaluated at import; the initial values are in the model
metadata ``tflite.variables`` (a JSON list of ``{"name", "input", "output",
"dtype", "shape", "initial"}``).
"""
from __future__ import annotations

import json
import weakref

import numpy as np
import tflite

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.tflite.context import QUANTIZED_TYPES, GraphState, OpContext
from nnrt_core.frontends.tflite.ops.registry import register
from nnrt_core.frontends.tflite.schema import guarded
from nnrt_core.frontends.tflite.table import OPERATOR, Table
from nnrt_core.ir import Value

__all__ = ["var_handle", "read_variable", "assign_variable", "call_once", "STATE_IN", "STATE_OUT"]

STATE_IN, STATE_OUT = "__state_in", "__state_out"


class _Variables:
    """The variables of one conversion: handle tensor -> name, current values, inputs, outputs, initial data."""

    def __init__(self) -> None:
        self.handles: dict[int, str] = {}
        self.current: dict[str, Value] = {}
        self.inputs: dict[str, Value] = {}
        self.outputs: dict[str, Value] = {}
        self.initial: dict[str, np.ndarray] = {}
        self.entries: dict[str, dict] = {}  #: ``tflite.variables`` entries, written once at the end


_TABLES: "weakref.WeakKeyDictionary[GraphState, _Variables]" = weakref.WeakKeyDictionary()


def _table(state: GraphState) -> _Variables:
    table = _TABLES.get(state)
    if table is None:
        table = _TABLES[state] = _Variables()
        state.finishers.append(lambda: _write(state, table))
    return table


def _handle_name(op: Table, fallback: str) -> str:
    o = tflite.VarHandleOptions()
    kind = op.u8(OPERATOR.builtin_options_type)
    table = op.table(OPERATOR.builtin_options) if kind else None
    if table is None:
        return fallback
    if kind != tflite.BuiltinOptions.VarHandleOptions:
        raise ModelLoadError(f"VAR_HANDLE of {fallback!r} stores options of kind {kind}, not VarHandleOptions")
    o.Init(table.buf, table.pos)
    name = (o.SharedName() or b"").decode("utf-8", "replace")
    container = (o.Container() or b"").decode("utf-8", "replace")
    return f"{container}/{name}" if container and name else name or fallback


@register("VAR_HANDLE")
def var_handle(ctx: OpContext) -> None:
    name = _handle_name(ctx.op, ctx.out_info().name)
    _table(ctx.state).handles[ctx.outputs[0]] = name
    ctx.state.slots[ctx.outputs[0]].const = np.array(name, dtype=object)  # a handle, not data


def _variable(ctx: OpContext) -> str:
    name = _table(ctx.state).handles.get(ctx.inputs[0]) if ctx.has(0) else None
    if name is None:
        raise ctx.fail("input 0 must be the output of a VAR_HANDLE in the same subgraph")
    return name


@register("READ_VARIABLE")
def read_variable(ctx: OpContext) -> None:
    table, name = _table(ctx.state), _variable(ctx)
    slot = ctx.state.slots[ctx.outputs[0]]
    if name in table.current:
        slot.plain = table.current[name]
        return
    info = ctx.out_info()
    v = table.inputs.get(name)
    if v is None:
        v = table.inputs[name] = ctx.state.new_value(name + STATE_IN, info.dtype, info.shape)
        ctx.state.graph.inputs.append(v)
    if slot.quant is not None and info.dtype in QUANTIZED_TYPES:
        v = ctx.state.dequantized(v, slot.quant, info.shape, f"{info.name}__dq", slot.quant.axis)
    slot.plain = table.current[name] = v
    _record(ctx.state, table, name, info.dtype.name.lower(), info.shape)


@register("ASSIGN_VARIABLE")
def assign_variable(ctx: OpContext) -> None:
    table, name = _table(ctx.state), _variable(ctx)
    info = ctx.info(1)
    value = ctx.x(1)
    table.current[name] = value
    quant = ctx.state.slots[ctx.inputs[1]].quant
    if quant is not None and info.dtype in QUANTIZED_TYPES:
        value = ctx.state.quantized(value, quant, info.dtype, info.shape, f"{name}__q", quant.axis)
    graph, names = ctx.state.graph, ctx.state.names
    old = table.outputs.get(name)
    if old is not None:  # assigned again: the last assignment is the state output
        graph.outputs = [o for o in graph.outputs if o is not old]
        names.pop(old.name, None)
        old.name = ctx.state.unique(name + "__state_prev")
        names[old.name] = old
    out = ctx.state.new_value(name + STATE_OUT, value.dtype, info.shape)
    ctx.state.add("Identity", [value], f"{name}__assign", [out])
    graph.outputs.append(out)
    table.outputs[name] = out
    _record(ctx.state, table, name, info.dtype.name.lower(), info.shape)


@register("CALL_ONCE")
def call_once(ctx: OpContext) -> None:
    """Evaluate the initializer subgraph: VAR_HANDLE + ASSIGN_VARIABLE of constants only."""
    index = int(ctx.options(tflite.CallOnceOptions).InitSubgraphIndex())
    flat = ctx.state.flat
    if not 0 < index < flat.n_subgraphs:
        raise ctx.fail(f"init subgraph {index} must be another subgraph (1..{flat.n_subgraphs - 1})")
    table = _table(ctx.state)
    with guarded(f"CALL_ONCE init subgraph {index}"):
        sg = flat.subgraph(index)
        tensors = flat.tensors(sg)
        handles: dict[int, str] = {}
        for k, op in enumerate(flat.operators(sg)):
            opname, _ = flat.op_codes[op.u32(OPERATOR.opcode_index)]
            ins = op.numbers(OPERATOR.inputs, np.int32).tolist()
            outs = op.numbers(OPERATOR.outputs, np.int32).tolist()
            if opname == "VAR_HANDLE" and len(outs) == 1 and 0 <= outs[0] < len(tensors):
                handles[outs[0]] = _handle_name(op, tensors[outs[0]].name)
            elif opname == "ASSIGN_VARIABLE" and len(ins) == 2 and ins[0] in handles and \
                    0 <= ins[1] < len(tensors) and tensors[ins[1]].data is not None:
                table.initial[handles[ins[0]]] = np.array(tensors[ins[1]].data)
            else:
                raise ctx.fail(f"init subgraph {index} operator {k} ({opname}) is not a VAR_HANDLE or an "
                               "ASSIGN_VARIABLE of a constant (only those are evaluated at import)")
    for name in list(table.inputs) + list(table.outputs):
        _record(ctx.state, table, name)


def _record(state: GraphState, table: _Variables, name: str, dtype: str | None = None,
            shape: tuple[int, ...] | None = None) -> None:
    """Update variable ``name``'s ``tflite.variables`` entry (written by :func:`_write`)."""
    e = table.entries.setdefault(name, {"name": name, "input": None, "output": None, "dtype": dtype,
                                  "shape": list(shape) if shape is not None else None, "initial": None})
    e["input"] = table.inputs[name].name if name in table.inputs else None
    e["output"] = table.outputs[name].name if name in table.outputs else None
    if name in table.initial:
        e["initial"] = table.initial[name].reshape(-1).tolist()


def _write(state: GraphState, table: _Variables) -> None:
    """``tflite.variables`` in the model metadata, once after the last operator
    (re-encoding it at every variable was quadratic in the number of variables)."""
    if table.entries:
        state.metadata["tflite.variables"] = json.dumps(list(table.entries.values()))
