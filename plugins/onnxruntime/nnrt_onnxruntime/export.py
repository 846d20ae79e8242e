"""IR -> ONNX bytes for ONNX Runtime: partitions and one-node probe models.

ONNX Runtime refuses models whose IR version is newer than it knows (onnx
1.23 writes IR 14, onnxruntime 1.31 reads at most 13), so every exported
model is capped at :func:`max_ir_version`: read from a table for the
onnxruntime releases it lists (each entry checked by probing, see
``tests/test_onnxruntime_backend.py``), found once per process by
:func:`probe_ir_version` for any other release.
"""
from __future__ import annotations

import functools
from typing import Any, Mapping

from nnrt_core.errors import ConfigError
from nnrt_core.plugin_api import ExternalWeights, to_onnx
from nnrt_core.plugin_api import proto_build as helper
from nnrt_core.plugin_api import P
from nnrt_core.ir import Graph, Node, OptionalType, SequenceType, TensorType, Value, ValueType
from nnrt_core.ir.clone import clone_node
from nnrt_core.ir.dtypes import DataType
from nnrt_core.plugin_api import get_logger
from nnrt_onnxruntime.precise import precise_kernels

__all__ = [
    "UntypedInputError",
    "max_ir_version",
    "probe_ir_version",
    "ort_release",
    "KNOWN_IR_VERSIONS",
    "export_partition",
    "PRECISE_CHOICES",
    "wants_precise_kernels",
    "relax_static_shapes",
    "probe_type",
    "build_probe_model",
    "quiet_session_options",
]

log = get_logger("nnrt.onnxruntime")

#: highest IR version known for some onnxruntime releases (used when probing fails)
_IR_TABLE = ((1, 20, 11), (1, 23, 12), (1, 31, 13))
#: (major, minor) of an onnxruntime release -> the highest IR version it accepts, as probed;
#: a release listed here is not probed (a probe builds a session: ~3-5 ms of a cold start)
KNOWN_IR_VERSIONS: dict[tuple[int, int], int] = {(1, 32): 14}


class UntypedInputError(ValueError):
    """A node input has no known type, so no probe model can be built."""


def quiet_session_options(threads: int = 1):
    """Session options for short-lived probe sessions: no optimization, no
    thread pools, no logging."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = threads
    return so


def ort_release() -> tuple[int, ...]:
    """(major, minor) of the installed onnxruntime (fewer parts if its version string is odd)."""
    import onnxruntime as ort

    parts = []
    for p in str(ort.__version__).split(".")[:2]:
        if not p.isdigit():
            break
        parts.append(int(p))
    return tuple(parts)


@functools.cache
def max_ir_version() -> int:
    """The highest model IR version the installed onnxruntime accepts, capped
    at the one the exporter writes: from :data:`KNOWN_IR_VERSIONS`, else probed."""
    known = KNOWN_IR_VERSIONS.get(ort_release())  # type: ignore[call-overload]
    if known is not None:
        return min(known, P.IR_VERSION)
    return probe_ir_version()


def probe_ir_version() -> int:
    """The highest IR version (at most the exporter's) with which onnxruntime
    builds a one-Identity model; a table guess when every probe fails."""
    import onnxruntime as ort

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "ir_probe",
        [helper.make_tensor_value_info("x", P.TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", P.TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    so = quiet_session_options()
    for ir in range(P.IR_VERSION, 6, -1):
        model.ir_version = ir
        try:
            ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            return ir
        except Exception:
            continue
    ver = ort_release()
    best = 7
    for major, minor, ir in _IR_TABLE:
        if ver >= (major, minor):
            best = ir
    log.warning("could not probe the IR version onnxruntime accepts; assuming %d", best)
    return best


def export_partition(graph: Graph, external: ExternalWeights | None = None, *,
                     precise: bool = False) -> P.ModelProto:
    """A partition graph as an ONNX model onnxruntime accepts (boundary inputs
    and outputs, only the initializers it reads, its opset imports); with
    ``external``, its large initializers are left out and collected there.
    With ``precise``, float32 ``Sigmoid`` and global average pools get exact
    equivalents (:mod:`.precise`); without, the nodes are ONNX Runtime's own
    (its bits and its fusions: :func:`wants_precise_kernels`)."""
    model = to_onnx(graph, ir_version=max_ir_version(), external=external)
    if precise:
        precise_kernels(model, graph)
    return model


#: values of the ``precise_kernels`` option
PRECISE_CHOICES = (True, False, "auto")


def wants_precise_kernels(graph: Graph, extra: Mapping[str, Any] | None) -> bool:
    """Whether the partition ``graph`` gets :mod:`.precise`'s exact Sigmoid and
    global pools: the ``precise_kernels`` option, ``"auto"`` (the default)
    meaning "for graphs imported from TFLite", whose reference is LiteRT (exact
    there); an ONNX model's reference is ONNX Runtime itself, so its partitions
    keep ORT's kernels: raw ORT's bits, and the fusions ORT finds (a SiLU's
    Sigmoid rewritten as four nodes is not fused, and costs 2x the one op)."""
    value = (extra or {}).get("precise_kernels", "auto")
    if value not in PRECISE_CHOICES or isinstance(value, int) and not isinstance(value, bool):
        raise ConfigError(f"onnxruntime option 'precise_kernels' must be true, false or \"auto\"; got {value!r}")
    return graph.origin == "tflite" if value == "auto" else bool(value)


def relax_static_shapes(model: P.ModelProto) -> int:
    """Keep only the element types and ranks of ``model``'s inputs, outputs
    and value infos (sub-graphs included): every dimension becomes unknown.

    ONNX Runtime type-checks every branch of an If with the shapes of the
    values it reads, dead branches included; some exported models only
    type-check with the symbolic dims they were saved with.  Returns how many
    dimensions were relaxed."""
    relaxed = 0

    def relax(vi: P.ValueInfoProto) -> None:
        nonlocal relaxed
        t = vi.type
        while t.HasField("sequence_type") or t.HasField("optional_type"):
            t = t.sequence_type.elem_type if t.HasField("sequence_type") else t.optional_type.elem_type
        if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
            for d in t.tensor_type.shape.dim:
                if d.HasField("dim_value") or d.HasField("dim_param"):
                    relaxed += 1
                d.Clear()

    def walk(g: P.GraphProto) -> None:
        for vi in [*g.input, *g.output, *g.value_info]:
            relax(vi)
        for n in g.node:
            for a in n.attribute:
                for sub in ([a.g] if a.type == P.AttributeProto.GRAPH else list(a.graphs)):
                    walk(sub)

    walk(model.graph)
    return relaxed


def probe_type(t: ValueType | None, what: str, exact: bool = False) -> ValueType:
    """``t`` with every tensor shape reduced to its rank (all dims dynamic),
    or with only its static dims kept when ``exact``."""
    if t is None:
        raise UntypedInputError(f"{what} has no known type")
    if isinstance(t, TensorType):
        if t.dtype == DataType.UNDEFINED:
            raise UntypedInputError(f"{what} has an undefined element type")
        if t.shape is None:
            return TensorType(t.dtype, None)
        if exact:
            return TensorType(t.dtype, tuple(d if isinstance(d, int) else None for d in t.shape))
        return TensorType(t.dtype, (None,) * len(t.shape))
    if isinstance(t, SequenceType):
        return SequenceType(probe_type(t.elem, what + " (sequence element)", exact))
    if isinstance(t, OptionalType):
        return OptionalType(probe_type(t.elem, what + " (optional element)", exact))
    raise UntypedInputError(f"{what} has an unsupported type {t!r}")


def build_probe_model(node: Node, *, exact_shapes: bool = False) -> P.ModelProto:
    """A one-node model running ``node`` on rank-only inputs (static shapes
    where known when ``exact_shapes``).

    Constant inputs become ordinary graph inputs (the answer must hold for any
    value); values the node's sub-graphs read from outer scopes become graph
    inputs too, so If/Loop/Scan are probed whole, bodies included.
    """
    parent = node.graph
    opsets: dict[str, int] = {}
    root = parent
    while root is not None and root.parent is not None:
        root = root.parent
    if root is not None:
        opsets.update(root.opset_imports)
    if "ai.onnx" in opsets:
        opsets.setdefault("", opsets.pop("ai.onnx"))
    opsets[node.domain] = node.opset or opsets.get(node.domain) or 1
    g = Graph("probe", opset_imports=opsets)
    vmap: dict[int, Value] = {}
    for v in node.all_inputs():
        if id(v) in vmap:
            continue
        nv = Value(v.name, probe_type(v.type, f"input {v.name!r}", exact_shapes))
        vmap[id(v)] = nv
        g.inputs.append(nv)
    copy = clone_node(node, vmap, g)
    g.add_node(copy)
    outs = []
    for v in copy.outputs:
        if v.name:
            v.type = None  # let onnxruntime infer them
            outs.append(v)
    g.outputs = outs
    return to_onnx(g, ir_version=max_ir_version())
