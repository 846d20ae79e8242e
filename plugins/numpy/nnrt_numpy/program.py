"""Compiling an IR graph into a flat program of kernel calls.

Everything is resolved at compile time: kernels (with parsed attributes),
register slots for every value, constants preloaded, and for each step the
slots that die after it (so intermediates are released as early as possible).
A run is then one tight loop over ``(kernel, input slots, output slots)``.
"""
from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.plugin_api import recall, remember
from nnrt_core.errors import ExecutionError, NnrtError, OpError
from nnrt_core.ir import DataType, Graph, Node, TensorType, Value
from nnrt_core.plugin_api import current_control

from nnrt_numpy.arena import FRESH_OUTPUT_OPS, ArenaPlan, plan_arena
from nnrt_numpy.fusion import Chain, find_chains
from nnrt_numpy.fusion_seconv import merge_se_conv
from nnrt_numpy.graph_facts import is_static_shape, value_dtype, value_readers
from nnrt_numpy.ieee import ieee_arithmetic
from nnrt_numpy.kernel import REGISTRY, Kernel, NodeInfo
from nnrt_numpy.shared import sharing
from nnrt_numpy.weight_dq import fold_constant_dequantize

__all__ = ["GraphProgram", "node_info", "FACTS_TAG"]

#: the NumPy backend's tag in :mod:`nnrt_core.backend.facts`
FACTS_TAG = "numpy.node_info"


def node_info(node: Node, compile_subgraph: Any = None) -> NodeInfo:
    """What kernels may know about ``node`` at compile time (one pass over
    its values, positional record fields: this runs for every node at
    capability and at compile)."""
    present, in_dtypes, in_shapes, consts = [], [], [], []
    for v in node.inputs:
        t = None if v is None else v.type
        tensor = isinstance(t, TensorType)
        present.append(v is not None)
        in_dtypes.append(_numpy_dtype(t.dtype) if tensor else None)
        in_shapes.append(t.shape if tensor else None)
        consts.append(None if v is None else v.const)
    out_dtypes, out_shapes = [], []
    for v in node.outputs:
        t = None if v is None else v.type
        tensor = isinstance(t, TensorType)
        out_dtypes.append(_numpy_dtype(t.dtype) if tensor else None)
        out_shapes.append(t.shape if tensor else None)
    # name, op_type, domain, opset, attrs, num_inputs, num_outputs, input_present, input_dtypes,
    # input_shapes, const_inputs, output_dtypes, output_shapes, compile_subgraph
    return NodeInfo(node.name, node.op_type, node.domain, node.opset or 1,
                    {k: a.value for k, a in node.attributes.items()}, len(node.inputs), len(node.outputs),
                    tuple(present), tuple(in_dtypes), tuple(in_shapes), tuple(consts), tuple(out_dtypes),
                    tuple(out_shapes), compile_subgraph)


def why_unsupported(node: Node) -> str | None:
    """``None`` when the NumPy backend can run ``node`` (and its sub-graphs).
    A supported node without sub-graphs leaves its :class:`NodeInfo` for the
    compile of the same placement (:mod:`nnrt_core.backend.facts`)."""
    info = node_info(node)
    reason = REGISTRY.why_unsupported(info)
    if reason is not None:
        return reason
    subs = node.subgraphs()
    if not subs:
        remember(FACTS_TAG, node, info)
    for sub in subs:
        for inner in sub.nodes:
            r = why_unsupported(inner)
            if r is not None:
                return f"sub-graph {sub.name!r} node {inner.name!r}: {r}"
    return None


def _bounds(node: Node, axis: int) -> list[tuple[int, int]]:
    """(start, stop) along ``axis`` of each (static) input of a Concat."""
    out, start = [], 0
    for v in node.inputs:
        out.append((start, start + v.shape[axis]))
        start += v.shape[axis]
    return out


def _node_kernel(node: Node) -> Kernel:
    """``node``'s kernel; :class:`OpError` when no kernel takes it.  A node the
    capability check of this placement found supported reuses its NodeInfo."""
    info = recall(FACTS_TAG, node)
    if info is None:
        info = node_info(node, compile_subgraph=GraphProgram.for_subgraph)
        reason = REGISTRY.why_unsupported(info)
        if reason is not None:
            raise OpError(f"node {node.name!r} ({node.op_type}): {reason}")
    cls = REGISTRY.lookup(node.domain, node.op_type, info.opset)
    assert cls is not None
    return cls(info)


def _make_kernel(info: NodeInfo) -> Kernel:
    cls = REGISTRY.lookup(info.domain, info.op_type, info.opset)
    assert cls is not None
    return cls(info)


class _Step:
    __slots__ = ("kernel", "ins", "outs", "scope_names", "scope_slots", "dead", "node", "chain", "place", "plain_ins")

    def __init__(self, kernel: Kernel, ins: list[int], outs: list[int], node: Node) -> None:
        self.kernel = kernel
        self.ins = ins
        self.outs = outs
        self.node = node
        self.chain: Chain | None = None
        # (buffer slot, shape, dtype, index): write the output into buffer[index] (Concat placement)
        self.place: tuple[int, tuple, np.dtype, tuple] | None = None
        self.scope_names: list[str] = []
        self.scope_slots: list[int] = []
        self.dead: list[int] = []


class GraphProgram:
    """A compiled graph.  ``run(inputs, scope)`` returns the graph outputs.

    ``scope`` supplies values of enclosing graphs read by a sub-graph body.
    """

    def __init__(self, graph: Graph, fuse: bool = True) -> None:
        self.graph = graph
        slots: dict[int, int] = {}
        self.consts: list[tuple[int, Any]] = []
        self.scope_in: list[tuple[str, int]] = []  # outer values read by this graph

        def slot(v: Value) -> int:
            s = slots.get(id(v))
            if s is None:
                s = slots[id(v)] = len(slots)
            return s

        self.input_slots = [slot(v) for v in graph.inputs]
        for v in graph.initializers.values():
            self.consts.append((slot(v), v.const))
        own = {id(v) for v in graph.values()}
        for v in graph.outer_references():
            if v.const is not None and id(v) not in own:
                self.consts.append((slot(v), v.const))
            else:
                self.scope_in.append((v.name, slot(v)))
        self.steps: list[_Step] = []
        kernels: list[Kernel] = []
        with sharing():  # nodes of the same shapes and attributes share set-up (depthwise plans)
            for node in graph.nodes:
                for v in node.inputs:
                    if v is not None and id(v) not in slots and v.const is not None:
                        self.consts.append((slot(v), v.const))
                kernels.append(_node_kernel(node))
        # backend-local fusion: a chain runs as one step at the position of its last node
        readers = value_readers(graph) if fuse else {}  # one walk for fusion and Concat placement
        chains = merge_se_conv(find_chains(graph, kernels, _make_kernel, readers), readers) if fuse else []
        absorbed = {id(n) for c in chains for n in c.nodes}
        chain_at = {id(c.nodes[-1]): c for c in chains}
        self.fused_nodes = len(absorbed) - len(chains)
        self.folded_weights = 0
        graph_outputs = {id(v) for v in graph.outputs}
        for node, kernel in zip(graph.nodes, kernels):
            chain = chain_at.get(id(node))
            if chain is not None:
                step = _Step(chain.run, [slot(v) if v is not None else -1 for v in chain.inputs],
                             [slot(chain.output)], chain.nodes[0])
                step.chain = chain
                self.steps.append(step)
                continue
            if id(node) in absorbed:
                continue
            folded = fold_constant_dequantize(node, kernel, graph_outputs)
            if folded is not None:  # a weight's DequantizeLinear: once, at compile
                self.consts.append((slot(node.outputs[0]), folded))
                self.folded_weights += 1
                continue
            step = _Step(kernel, [slot(v) if v is not None else -1 for v in node.inputs],
                         [slot(v) for v in node.outputs], node)
            if type(kernel).needs_scope:
                for v in node.outer_inputs():
                    step.scope_names.append(v.name)
                    step.scope_slots.append(slot(v))
            self.steps.append(step)
        self.output_slots = [slot(v) for v in graph.outputs]
        self.nslots = len(slots)
        self.placed = self._place_concat_inputs(graph, slot, readers) if fuse else 0
        self._plan_lifetimes()
        self.arena: ArenaPlan | None = self._plan_arena() if fuse else None
        if self.arena is None and not self.scope_in and all(
                st.place is None and not st.scope_slots for st in self.steps):
            # nothing but kernels on registers: the lean loop (per-call overhead
            # matters for small graphs); a missing optional input (-1) reads a
            # register that stays None
            for st in self.steps:
                st.plain_ins = [i if i >= 0 else self.nslots for i in st.ins]
            self._regs = [None] * (self.nslots + 1)
            for slot_, c in self.consts:
                self._regs[slot_] = c
            self.run = self._run_plain  # type: ignore[method-assign]

    @ieee_arithmetic
    def _run_plain(self, inputs: Sequence[Any], scope: Mapping[str, Any] | None = None) -> list[Any]:
        """:meth:`run` for programs without arena, placements or outer scope."""
        regs = self._regs.copy()
        for s, x in zip(self.input_slots, inputs):
            regs[s] = x
        step = None
        watch = current_control()  # deadline / cancellation, checked before every step
        if watch is not None and not watch.watched:
            watch = None
        try:
            for step in self.steps:
                if watch is not None and watch.stopped():
                    raise watch.error(f"{self._where(step)} of graph {self.graph.name!r}")
                outs = step.kernel(*[regs[i] for i in step.plain_ins])
                for s, o in zip(step.outs, outs):
                    regs[s] = o
                for s in step.dead:
                    regs[s] = None
        except NnrtError:
            raise
        except Exception as e:
            raise self._failure(step, e) from e
        return [np.asarray(o) if isinstance(o, np.generic) else o for o in (regs[s] for s in self.output_slots)]

    def _where(self, step: "_Step | None") -> str:
        """"node 'x' (Op)" (with the nodes fused into it), for error messages."""
        n = step.node if step is not None else None
        where = f"node {n.name!r} ({n.op_type})" if n is not None else f"graph {self.graph.name!r}"
        if step is not None and step.chain is not None:
            where += " fused with " + ", ".join(f"{m.name!r} ({m.op_type})" for m in step.chain.nodes[1:])
        return where

    def _failure(self, step: "_Step | None", e: Exception) -> ExecutionError:
        return ExecutionError(f"{self._where(step)} failed: {type(e).__name__}: {e}")

    def _place_concat_inputs(self, graph: Graph, slot, readers: dict[int, list]) -> int:
        """Concat placement: a Conv (or fused chain) step whose output is read
        only by a Concat writes straight into its slice of the Concat output,
        which the first such step of a run allocates in the run's registers
        (per call: concurrent runs share nothing).  The Concat step then only
        copies the inputs that were not placed.  Returns the number of placed
        inputs."""
        outputs = {id(v) for v in graph.outputs}
        producer: dict[int, int] = {}  # output slot -> step index
        for i, st in enumerate(self.steps):
            for o in st.outs:
                producer[o] = i
        placed = 0
        for ci, st in enumerate(self.steps):
            node = st.node
            if st.chain is not None or node.op_type != "Concat" or node.domain not in ("", "ai.onnx"):
                continue
            y = node.outputs[0]
            dt = value_dtype(y)
            if dt is None or dt.kind != "f" or not is_static_shape(y.shape) or len(y.shape) < 2:
                continue
            shape = tuple(y.shape)
            axis = getattr(st.kernel, "axis", None)
            if axis is None or not -len(shape) <= axis < len(shape):
                continue
            axis %= len(shape)
            if any(d != 1 for d in shape[:axis]):  # the slices must be contiguous
                continue
            if len({id(v) for v in node.inputs}) != len(node.inputs) or any(v is None for v in node.inputs):
                continue
            bslot = slot(y)
            plan: list[tuple[int, int, int] | None] = []  # (producer step, start, stop) per input
            start = 0
            for v in node.inputs:
                if not is_static_shape(v.shape) or len(v.shape) != len(shape) or value_dtype(v) != dt:
                    plan = []
                    break
                stop = start + v.shape[axis]
                p = producer.get(slot(v))
                ok = (p is not None and p < ci and id(v) not in outputs and readers.get(id(v)) == [node]
                      and len(self.steps[p].outs) == 1 and self.steps[p].place is None
                      and not self.steps[p].scope_slots
                      and (self.steps[p].chain is not None or getattr(self.steps[p].kernel, "accepts_out", False))
                      and tuple(self.steps[p].node.outputs[0].shape if self.steps[p].chain is None
                                else self.steps[p].chain.output.shape) == tuple(v.shape))
                plan.append((p, start, stop) if ok else None)
                start = stop
            if start != shape[axis] or not any(plan):
                continue
            for entry in plan:
                if entry is not None:
                    p, a, b = entry
                    index = (slice(None),) * axis + (slice(a, b),)
                    self.steps[p].place = (bslot, shape, dt, index)
                    placed += 1
            rest = [(k, (slice(None),) * axis + (slice(start_, stop_),))
                    for k, (start_, stop_) in enumerate(_bounds(node, axis)) if plan[k] is None]

            def fill(buf, *xs, _rest=rest, _shape=shape, _dt=dt):
                for k, index in _rest:
                    if xs[k].shape != buf[index].shape:
                        raise ValueError(f"Concat input {k} has shape {xs[k].shape}, planned {buf[index].shape}")
                    buf[index] = xs[k]
                return (buf,)

            st.kernel = fill
            st.ins = [bslot] + st.ins
        return placed

    def _plan_arena(self) -> ArenaPlan | None:
        """Steps that write into a given buffer (Conv, FusedConv, fused chains)
        and have one static float output get it from the run's arena (see
        :mod:`nnrt_numpy.arena`)."""
        candidates: dict[int, tuple[tuple[int, ...], np.dtype]] = {}
        fresh = {i for i, st in enumerate(self.steps) if st.chain is None and st.kernel is not None
                 and st.node.domain in ("", "ai.onnx") and st.node.op_type in FRESH_OUTPUT_OPS
                 and not st.scope_slots and st.place is None}
        for i, st in enumerate(self.steps):
            if len(st.outs) != 1 or st.place is not None or st.scope_slots:
                continue
            if st.chain is None and not getattr(st.kernel, "accepts_out", False):
                continue
            v = st.chain.output if st.chain is not None else st.node.outputs[0]
            dt = value_dtype(v)
            if dt is None or dt.kind != "f" or not is_static_shape(v.shape):
                continue
            candidates[i] = (tuple(v.shape), dt)
        return plan_arena(self.steps, self.output_slots, {s for s, _ in self.consts}, candidates, fresh)

    @staticmethod
    def for_subgraph(graph: Graph) -> "SubgraphRunner":
        return SubgraphRunner(GraphProgram(graph))

    def _plan_lifetimes(self) -> None:
        keep = set(self.output_slots) | {s for s, _ in self.consts}
        last: dict[int, int] = {}
        for i, st in enumerate(self.steps):
            for s in st.ins + st.scope_slots + st.outs:
                if s >= 0:
                    last[s] = i
        for s, i in last.items():
            if s not in keep:
                self.steps[i].dead.append(s)

    @ieee_arithmetic
    def run(self, inputs: Sequence[Any], scope: Mapping[str, Any] | None = None) -> list[Any]:
        regs: list[Any] = [None] * self.nslots
        for s, c in self.consts:
            regs[s] = c
        for s, x in zip(self.input_slots, inputs):
            regs[s] = x
        if self.scope_in:
            if scope is None:
                raise ExecutionError(f"graph {self.graph.name!r} reads outer values but got no scope")
            for name, s in self.scope_in:
                regs[s] = scope[name]
        step = None
        watch = current_control()  # deadline / cancellation, checked before every step
        if watch is not None and not watch.watched:
            watch = None
        arena = self.arena
        planned = arena.acquire() if arena is not None else None
        try:
            for index, step in enumerate(self.steps):
                if watch is not None and watch.stopped():
                    raise watch.error(f"{self._where(step)} of graph {self.graph.name!r}")
                args = [regs[i] if i >= 0 else None for i in step.ins]
                if planned is not None and index in planned:
                    outs = step.kernel(*args, out=planned[index])
                elif step.scope_slots:
                    inner_scope = dict(scope or {})
                    inner_scope.update(zip(step.scope_names, (regs[i] for i in step.scope_slots)))
                    outs = step.kernel(*args, scope=inner_scope)
                elif step.place is not None:
                    bslot, shape, dt, index = step.place
                    buf = regs[bslot]
                    if buf is None:
                        buf = regs[bslot] = np.empty(shape, dt)
                    outs = step.kernel(*args, out=buf[index])
                else:
                    outs = step.kernel(*args)
                for s, o in zip(step.outs, outs):
                    regs[s] = o
                for s in step.dead:
                    regs[s] = None
        except NnrtError:
            raise
        except Exception as e:
            raise self._failure(step, e) from e
        finally:
            if planned is not None:
                arena.release(planned)
        # numpy ops on 0-d arrays give numpy scalars (np.take, a + b): outputs are always arrays
        return [np.asarray(o) if isinstance(o, np.generic) else o for o in (regs[s] for s in self.output_slots)]


class SubgraphRunner:
    """Callable handed to control-flow kernels: ``runner(inputs, scope)``."""

    def __init__(self, program: GraphProgram) -> None:
        self.program = program
        self.input_names = [v.name for v in program.graph.inputs]
        self.output_names = [v.name for v in program.graph.outputs]
        #: (index, declared dtype) of the body's tensor inputs whose element type is known
        self._declared = [(i, _declared_dtype(v)) for i, v in enumerate(program.graph.inputs)
                          if _declared_dtype(v) is not None]

    def __call__(self, inputs: Sequence[Any], scope: Mapping[str, Any] | None = None) -> list[Any]:
        if len(inputs) != len(self.input_names):
            raise ExecutionError(f"sub-graph {self.program.graph.name!r} declares {len(self.input_names)} inputs "
                                 f"{self.input_names}; the node passed {len(inputs)}")
        for i, want in self._declared:  # a crafted model binds other types than the body declares
            got = getattr(inputs[i], "dtype", None)
            if got is not None and got != want and not (want.kind == "O" and got.kind in "USO"):
                raise ExecutionError(f"sub-graph {self.program.graph.name!r} input {self.input_names[i]!r} is "
                                     f"declared {want}; the node passed {got}")
        return self.program.run(inputs, scope)


def _declared_dtype(v: Value) -> np.dtype | None:
    t = v.type
    return _numpy_dtype(t.dtype) if isinstance(t, TensorType) else None


@functools.lru_cache(maxsize=None)
def _numpy_dtype(dtype: DataType) -> np.dtype | None:
    """The numpy dtype of an element type; ``None`` without one."""
    try:
        return dtype.numpy
    except TypeError:
        return None
