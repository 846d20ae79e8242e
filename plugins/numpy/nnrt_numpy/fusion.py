"""Backend-local fusion of elementwise tails into the node that feeds them.

At compile time :class:`~nnrt_numpy.program.GraphProgram` looks for chains
``head -> tail -> tail -> ...`` where every intermediate value has exactly one
reader (the next node of the chain) and is not a graph output, and runs the
chain as one step:

* the **head** (Conv, ConvTranspose, Gemm, MatMul, BatchNormalization, Concat,
  Sum, Add, Mul: kernels that always return a fresh array; or quantize_dynamic's
  MatMulInteger -> Cast -> Mul, :mod:`nnrt_numpy.fusion_quant`) runs its own kernel;
* every **tail** is applied in place on that array (``out=``): per-channel
  affine (inference BatchNormalization, Mul/Add by a constant that broadcasts
  along the channel axis), Add/Sum/Mul with another tensor that broadcasts
  onto the chain value (residual connections, attention masks), Relu,
  LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish, hard-swish spelled out as
  Add/Clip/Mul/Div (:mod:`nnrt_numpy.fusion_tails`), exact GELU (the Gelu op,
  or spelled out as Div/Erf/Add/Mul/Mul: :mod:`nnrt_numpy.fusion_gelu`,
  float32 only) and last-axis Softmax (:mod:`nnrt_numpy.fusion_rows`); large
  tails run in row pieces on the idle cores (:mod:`nnrt_numpy.fusion_split`).

Squeeze-and-excitation blocks (GlobalAveragePool, two 1x1 Convs, Relu,
HardSigmoid, Mul) are found first and run as one step
(:mod:`nnrt_numpy.fusion_se`); the program then merges such a block with the
1x1 Conv (chain) reading its output (:mod:`nnrt_numpy.fusion_seconv`).

Shapes may be symbolic (a free batch or image size): equal symbols stand for
equal sizes; per-channel tails need a static channel axis (axis 1), the other
tails do not (MatMul + bias over (N, T, C) with a symbolic T).  A tail's
declared output may name the head's sizes with other symbols
(:func:`nnrt_numpy.fusion_shapes.renames`) and a tensor operand need only
possibly broadcast without growing the value
(:func:`nnrt_numpy.fusion_shapes.may_broadcast`); one that does not at run
time is broadcast as the unfused node would.

Conv (or ConvTranspose) heads with constant weights fold the per-channel
affine tails that directly follow into their weights and bias at compile time
(``W' = W * a``, ``B' = B * a + s``): BatchNorm and such Mul/Add pairs cost nothing.

The results equal those of the unfused nodes up to float32 rounding (only
the folded affine changes the order of the roundings).  The IR graph is not
modified: the placement report and all value names stay per original node.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from nnrt_numpy import special

from nnrt_core.ir import Graph, Node, Value

from nnrt_numpy.fusion_affine import bn_affine, compose_channel_affine, fold_into_conv
from nnrt_numpy.fusion_gelu import match_gelu
from nnrt_numpy.fusion_quant import match_int_head
from nnrt_numpy.fusion_se import SEChain, find_se
from nnrt_numpy.fusion_rows import ROW_KINDS, apply_row, row_tail
from nnrt_numpy.fusion_split import split_tails
from nnrt_numpy.fusion_shapes import channel_vector, fits, known_shape, may_broadcast, renames
from nnrt_numpy.fusion_tails import apply_hard, hard_tail, match_hardswish, match_x_hardsigmoid
from nnrt_numpy.graph_facts import value_dtype, value_readers
from nnrt_numpy.kernel import Kernel, NodeInfo
from nnrt_numpy.ufuncs import clip

__all__ = ["Chain", "find_chains", "apply_ops"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
#: kernels whose first output is always a freshly allocated array
_HEADS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization", "Concat", "Sum", "Add", "Mul"}


class Chain:
    """One fused step: a head kernel and the in-place tail operations."""

    __slots__ = ("nodes", "inputs", "nhead", "output", "head", "overrides", "ops", "run")
    #: ``run(*args, out=array)`` writes the result into ``out`` (see program.py, Concat placement)
    accepts_out = True

    def __init__(self, nodes: list[Node], inputs: list[Value | None], nhead: int, head: Callable,
                 overrides: dict[int, np.ndarray], ops: list[tuple]) -> None:
        self.nodes = nodes
        self.inputs = inputs  # the head's inputs, then one per tensor-operand tail
        self.nhead = nhead  # how many of ``inputs`` the head takes
        self.output = nodes[-1].outputs[0]
        self.head = head
        self.overrides = overrides
        self.ops = ops
        self._compile()

    def _compile(self) -> None:
        nh = self.nhead
        head = self.head
        over = sorted(self.overrides.items())
        ops = self.ops

        head_out = getattr(head, "accepts_out", False)
        epi = per_value_tails(ops) if getattr(head, "accepts_epilogue", False) and head_out else None
        if epi is not None:  # the head runs the tails (on each of its pieces when it splits)
            def run_epi(*args: Any, out: np.ndarray | None = None) -> tuple[Any]:
                hargs = list(args[:nh])
                for i, c in over:
                    hargs[i] = c
                return head(*hargs, out=out, epilogue=epi)

            self.run = run_epi
            return

        def run(*args: Any, out: np.ndarray | None = None) -> tuple[Any]:
            hargs = list(args[:nh])
            for i, c in over:
                hargs[i] = c
            if out is not None and head_out:
                y = head(*hargs, out=out)[0]
            else:
                y = head(*hargs)[0]
                if out is not None:  # compute, then place (the tails below then run on ``out``)
                    if y.shape != out.shape:
                        raise ValueError(f"output shape {y.shape} differs from the planned {out.shape}")
                    np.copyto(out, y)
                    y = out
            if not split_tails(ops, y, args, apply_ops):  # (in row pieces on the idle cores when worth it)
                y = apply_ops(ops, y, args)
            if out is not None and y is not out:
                np.copyto(out, y)
                y = out
            return (y,)

        self.run = run

    def __call__(self, *args: Any, out: np.ndarray | None = None) -> tuple[Any]:
        return self.run(*args, out=out)


def apply_ops(ops: list[tuple], y: np.ndarray, args: Sequence[Any]) -> np.ndarray:
    """Run the tail ``ops`` on ``y`` in place (``args``: the chain's inputs, for ``add_in`` / ``mul_in``)."""
    for op in ops:
        kind = op[0]
        if kind == "relu":  # clip: one SIMD pass, 2.6x faster than maximum with a scalar
            clip(y, op[1], op[2], out=y)
        elif kind == "mul":
            np.multiply(y, op[1], out=y)
        elif kind == "add":
            np.add(y, op[1], out=y)
        elif kind in ("add_in", "mul_in"):
            other = args[op[1]]
            fn = np.add if kind == "add_in" else np.multiply
            if np.shape(other) == y.shape or np.broadcast_shapes(np.shape(other), y.shape) == y.shape:
                fn(y, other, out=y)  # (a mask broadcasting onto attention scores: in place too)
            else:  # symbolic shapes said it fits; broadcast as the unfused node would
                y = fn(y, other)
        elif kind == "leaky":
            np.multiply(y, op[1], out=y, where=y < 0)
        elif kind == "clip":  # max then min (hi wins when lo > hi), NaN kept: as np.clip, in one pass
            clip(y, op[1], op[2], out=y)
        elif kind == "sigmoid":
            special.expit(y, out=y)
        elif kind in ROW_KINDS:
            y = apply_row(op, y)
        else:
            apply_hard(op, y)
    return y


#: tails that act on every value alone (with scalar operands): runnable on any piece of the output
_PER_VALUE = frozenset({"relu", "clip", "leaky", "sigmoid", "gelu", "hsig", "hswish", "hswish3"})


def per_value_tails(ops: list[tuple]) -> Callable[[np.ndarray], None] | None:
    """An in-place function running ``ops`` on any piece (view) of the head's output, or None
    when one of them needs more than the value itself (a per-channel or tensor operand)."""
    scal: list[tuple] = []
    for op in ops:
        if op[0] in ("mul", "add") and np.size(op[1]) == 1:
            scal.append((op[0], np.asarray(op[1]).reshape(())))  # as a 0-d array: broadcasts onto any piece
        elif op[0] in _PER_VALUE:
            scal.append(op)
        else:
            return None
    if not scal:
        return None

    def epilogue(y: np.ndarray) -> None:
        apply_ops(scal, y, ())

    return epilogue


def _const_operand(node: Node, y: Value) -> tuple[int, np.ndarray | None, Value | None]:
    """For a binary node reading ``y``: (index of y, constant other operand or None, other Value)."""
    iy = 0 if node.inputs[0] is y else 1
    other = node.inputs[1 - iy]
    return iy, (other.const if other is not None else None), other


def _tail(node: Node, y: Value, ydt: np.dtype, yshape: tuple) -> tuple | None:
    """The in-place operation equivalent to ``node`` applied to ``y`` (or None)."""
    op = node.op_type
    if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
        return None
    out = node.outputs[0]
    odt = value_dtype(out)
    if odt is None or odt != ydt or out.shape is None or not renames(tuple(out.shape), yshape):
        return None  # (a tail keeps its input's size: other symbols for it are the same sizes)
    t = ydt.type
    if op == "Relu":
        return ("relu", t(0), t(np.inf))
    if op == "Gelu" and ydt == np.float32 and node.attributes.get("approximate") in (None, "none", b"none"):
        return ("gelu",)
    if op == "LeakyRelu":
        return ("leaky", t(float(node.attributes["alpha"].value) if "alpha" in node.attributes else 0.01))
    if op == "Sigmoid":
        special.load()  # at compile, not in the first run
        return ("sigmoid",)
    if op == "Clip":
        if node.opset < 11:
            lo = node.attributes["min"].value if "min" in node.attributes else None
            hi = node.attributes["max"].value if "max" in node.attributes else None
        else:
            bounds = []
            for v in node.inputs[1:3]:
                if v is None or not v.name:
                    bounds.append(None)
                elif v.const is None or v.const.size != 1:
                    return None
                else:
                    bounds.append(v.const.reshape(()))
            bounds += [None] * (2 - len(bounds))
            lo, hi = bounds
        return ("clip", t(-np.inf) if lo is None else t(lo), t(np.inf) if hi is None else t(hi))
    if op in ("HardSigmoid", "HardSwish"):
        return hard_tail(node, ydt)
    if op == "BatchNormalization":
        return ("bn",)  # resolved by the caller (needs the kernel)
    if op in ("Add", "Mul", "Sum"):
        if node.opset < (8 if op == "Sum" else 7) or len(node.inputs) != 2:
            return None
        if node.inputs[0] is y and node.inputs[1] is y:
            return None
        iy, c, other = _const_operand(node, y)
        if other is None or value_dtype(other) != ydt:
            return None
        if c is not None:
            vec = channel_vector(c, yshape)
            if vec is not None:
                vec = vec.astype(ydt)
                return ("mul" if op == "Mul" else "add", vec, "channel")
            if not fits(c.shape, yshape):
                return None
            return ("mul" if op == "Mul" else "add", np.ascontiguousarray(c, dtype=ydt), "const")
        if other.shape is None or not may_broadcast(tuple(other.shape), yshape):
            return None
        return ("mul_in" if op == "Mul" else "add_in", other)
    return row_tail(node, y, ydt, yshape)


def find_chains(graph: Graph, kernels: Sequence[Kernel], make_kernel: Callable[[NodeInfo], Kernel],
                readers: dict[int, list] | None = None) -> list[Chain | SEChain]:
    """Chains of ``graph.nodes`` worth fusing: squeeze-and-excitation blocks
    (:mod:`nnrt_numpy.fusion_se`) first, then head -> tails chains (a head may be
    MatMulInteger -> Cast -> Mul, :mod:`nnrt_numpy.fusion_quant`).  ``kernels[i]``
    is the kernel of ``graph.nodes[i]``; ``make_kernel`` builds a kernel from a
    (modified) NodeInfo; ``readers``: the graph's :func:`value_readers` when the
    caller has them."""
    readers = readers if readers is not None else value_readers(graph)
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    chains: list[Chain | SEChain] = list(find_se(graph, readers))
    taken: set[int] = {id(n) for c in chains for n in c.nodes}
    for i, head in enumerate(graph.nodes):
        if id(head) in taken:
            continue
        qhead = match_int_head(head, kernels[i], readers, index)
        if qhead is not None and not any(id(n) in taken for n in qhead[0]):
            nodes, inputs, run_head = qhead
            f32, y = np.dtype(np.float32), nodes[-1].outputs[0]
            tails = _grow(nodes, y, tuple(y.shape), f32, readers, index, taken, kernels)
            chains.append(_build(nodes, kernels[i], tails, tuple(y.shape), f32, make_kernel, (inputs, run_head)))
            taken.update(id(n) for n in nodes)
            continue
        if head.op_type not in _HEADS or head.domain not in ("", "ai.onnx"):
            continue
        if len(head.outputs) != 1 or head.subgraphs():
            continue
        y = head.outputs[0]
        ydt = value_dtype(y)
        if ydt is None or ydt not in _FLOATS or not known_shape(y.shape):
            continue
        yshape = tuple(y.shape)
        if head.op_type == "BatchNormalization" and bn_affine(head, kernels[i]) is None:
            continue
        if head.op_type in ("Add", "Mul", "Sum") and (head.opset < (8 if head.op_type == "Sum" else 7)):
            continue
        nodes = [head]
        tails = _grow(nodes, y, yshape, ydt, readers, index, taken, kernels)
        if not tails:
            continue
        chains.append(_build(nodes, kernels[i], tails, yshape, ydt, make_kernel))
        taken.update(id(n) for n in nodes)
    return chains


def _grow(nodes: list[Node], cur: Value, shape: tuple, ydt: np.dtype, readers: dict[int, list],
          index: dict[int, int], taken: set[int], kernels: Sequence[Kernel]) -> list[tuple]:
    """The tails that follow ``cur`` (the output of ``nodes[-1]``), appending their nodes to ``nodes``."""
    tails: list[tuple] = []
    while True:
        users = readers.get(id(cur), [])
        if len(users) != 1 or users[0] is None:
            def same(v: Value, _dt=ydt, _shape=shape) -> bool:
                return value_dtype(v) == _dt and v.shape is not None and tuple(v.shape) == _shape

            hs = match_hardswish(cur, readers, same) or match_x_hardsigmoid(cur, readers, same)
            if hs is None and ydt == np.float32:
                hs = match_gelu(cur, readers, same)
            if hs is None or any(id(n) in taken or index.get(id(n), -1) <= index[id(nodes[-1])] for n in hs[0]):
                return tails
            nodes.extend(hs[0])
            tails.append(hs[1])
            cur = hs[0][-1].outputs[0]
            continue
        nxt = users[0]
        j = index.get(id(nxt))
        if j is None or id(nxt) in taken or j <= index[id(nodes[-1])]:
            return tails
        t = _tail(nxt, cur, ydt, shape)
        if t is None:
            return tails
        if t[0] == "bn":
            if nxt.inputs[0] is not cur:
                return tails
            ab = bn_affine(nxt, kernels[j])
            if ab is None:
                return tails
            a, s = ab
            t = ("affine", a.astype(ydt), s.astype(ydt))
        nodes.append(nxt)
        tails.append(t)
        cur = nxt.outputs[0]
        shape = tuple(cur.shape)  # a residual Add's output may name its sizes otherwise


def _build(nodes: list[Node], head_kernel: Kernel, tails: list[tuple], yshape: tuple, ydt: np.dtype,
           make_kernel: Callable[[NodeInfo], Kernel],
           head_inputs: tuple[list[Value | None], Callable] | None = None) -> Chain:
    head = nodes[0]
    inputs: list[Value | None] = list(head.inputs) if head_inputs is None else list(head_inputs[0])
    run_head: Callable = head_kernel if head_inputs is None else head_inputs[1]
    cshape = (-1,) + (1,) * (len(yshape) - 2)
    overrides: dict[int, np.ndarray] = {}
    k = 0  # fold the per-channel affine tails right after a constant-weight Conv into its weights
    folded = fold_into_conv(head, head_kernel, tails, yshape, ydt, make_kernel)
    if folded is not None:
        run_head, overrides, k = folded
        inputs += [None] * (3 - len(inputs))  # (a no-op when the head has its 3 inputs)
    if head.op_type == "BatchNormalization":
        # fold the per-channel affine tails that follow into the head's own affine
        a, s = bn_affine(head, head_kernel)
        a, s, k = compose_channel_affine(tails, a.astype(np.float64), s.astype(np.float64))
        if k:
            av = a.astype(ydt).reshape(cshape)
            sv = s.astype(ydt).reshape(cshape)
        else:  # same arithmetic as the BatchNormalization kernel
            av, sv = (v.astype(ydt).reshape(cshape) for v in bn_affine(head, head_kernel))

        def run_head(x: np.ndarray, *_: Any, _a=av) -> tuple[np.ndarray]:
            return (np.multiply(x, _a),)

        tails = [("add", sv, "ready")] + tails[k:]
        k = 0
    nhead = len(inputs)
    ops: list[tuple] = []
    for t in tails[k:]:
        kind = t[0]
        if kind == "affine":
            ops.append(("mul", t[1].reshape(cshape)))
            ops.append(("add", t[2].reshape(cshape)))
        elif kind in ("mul", "add"):
            ops.append((kind, t[1].reshape(cshape) if t[2] == "channel" else t[1]))
        elif kind in ("add_in", "mul_in"):
            inputs.append(t[1])
            ops.append((kind, len(inputs) - 1))
        else:
            ops.append(t)
    return Chain(nodes, inputs, nhead, run_head, overrides, ops)
