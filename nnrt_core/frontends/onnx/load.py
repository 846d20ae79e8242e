"""ONNX file / bytes / ``ModelProto`` -> nnrt IR.

Parsing, checking, function inlining and shape inference are done by the
``onnx`` package; this frontend only translates protos into IR objects and
adds the safety checks an untrusted file needs: external data must stay
inside the model's folder, no tensor may claim more bytes than its data
holds or than ``MAX_TENSOR_BYTES``, and every node's attributes and arity
must pass :mod:`nnrt_core.frontends.onnx.validate` before shape inference.
External data is read once into arrays the model owns, never through the
protobuf (see
:mod:`nnrt_core.frontends.onnx.external_data`).
"""
from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx import onnx_api
from nnrt_core.frontends.onnx.contrib_shapes import complete_contrib_types
from nnrt_core.frontends.onnx.convert import model_from_proto
from nnrt_core.frontends.onnx import declared_outputs
from nnrt_core.frontends.onnx.external_data import for_checker, load_external_data
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.lean_inference import infer_shapes_lean
from nnrt_core.frontends.onnx.free_dims import apply_input_shapes, clear_unknown_dims, has_unknown_dims
from nnrt_core.frontends.onnx.implied_opsets import add_implied_opsets, missing_implied_opsets
from nnrt_core.frontends.onnx.spec_defaults import missing_spec_defaults, write_spec_defaults
from nnrt_core.frontends.onnx.protos import ModelSource, copy_model, first_line, subgraphs
from nnrt_core.frontends.onnx.validate_proto import validate_model
from nnrt_core.ir import Model
from nnrt_core.logs import get_logger

__all__ = ["ModelCheckError", "check_model", "load_onnx", "parse_model_proto", "sort_nodes"]

log = get_logger("nnrt.onnx")


class ModelCheckError(ValueError):
    """The ONNX checker (or its full check's shape inference) rejected a model."""


def check_model(proto: P.ModelProto, *, full_check: bool = False) -> None:
    """Run ``onnx.checker`` on ``proto``; :class:`ModelCheckError` (with the
    checker's message) when it fails."""
    try:
        onnx_api.check_model(proto, full_check=full_check)
    except (onnx_api.ValidationError, onnx_api.InferenceError) as e:
        raise ModelCheckError(str(e)) from e


def parse_model_proto(source: ModelSource) -> tuple[P.ModelProto, str | None]:
    """Parse ``source`` into a ``ModelProto`` with external data resolved.

    Returns the proto and the folder external data was resolved against.
    External data is read into the tensors' ``raw_data`` (a copy);
    :func:`load_onnx` maps it instead.
    """
    proto, base_dir, _ = _parse_source(source)
    load_external_data(proto, base_dir)
    return proto, base_dir


def _parse_source(source: ModelSource) -> tuple[P.ModelProto, str | None, bytes | None]:
    """``source`` as a ``ModelProto`` (external data not resolved), its
    folder, and the bytes it was parsed from (``None`` for a ``ModelProto``)."""
    base_dir: str | None = None
    data: bytes | None = None
    if isinstance(source, P.ModelProto):
        proto = source
    elif getattr(getattr(source, "DESCRIPTOR", None), "full_name", None) == "onnx.ModelProto":
        proto = _parse_bytes(source.SerializeToString(), "<ModelProto>")  # the class of another protobuf build
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        proto = _parse_bytes(data, "<bytes>")
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ModelLoadError(f"model file {str(path)!r} does not exist or is not a file")
        base_dir = str(path.resolve().parent)
        data = path.read_bytes()
        proto = _parse_bytes(data, str(path))
    else:
        raise ModelLoadError(
            f"cannot load a model from {type(source).__name__}; expected a path, bytes, "
            "P.ModelProto or nnrt_core.ir.Model"
        )
    return proto, base_dir, data


def _parse_bytes(data: bytes, what: str) -> P.ModelProto:
    proto = P.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:
        raise ModelLoadError(f"{what} is not a valid ONNX protobuf: {first_line(e)}") from e
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{what} holds no ONNX graph (is it an ONNX model?)")
    return proto


def load_onnx(
    source: ModelSource,
    *,
    check: bool = True,
    infer_shapes: bool | str = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    weights: Mapping[str, Any] | None = None,
    sort: bool = True,
) -> Model:
    """Load an ONNX model into the IR (see module docstring).

    ``input_shapes`` (input name -> concrete shape) fixes free input
    dimensions before shape inference, like ONNX Runtime's free-dimension
    overrides or OpenVINO's ``reshape``: the static shapes then propagate
    through the graph.  A name that is no graph input, a wrong rank or a size
    that contradicts a fixed dimension is a :class:`ConfigError`.
    ``weights`` (location -> read-only bytes-like) holds external data in
    memory: tensors stored there are viewed in place, not read from files
    (a compiled partition's weights, see the NumPy backend).

    For files we wrote ourselves (a compiled partition): ``sort=False``
    leaves an unsorted graph to the checker, which refuses it, instead of
    sorting it; ``infer_shapes="missing"`` runs shape inference only when
    some node output of the main graph has no declared tensor element type
    (or a node has sub-graphs).  The element types are checked against the
    schemas either way."""
    proto, base_dir, data = _parse_source(source)
    mapped: dict[str, np.ndarray] = {}  # external data read into arrays, see load_external_data
    if load_external_data(proto, base_dir, mapped, weights):
        data = None  # ``data``: the bytes ``proto`` was parsed from while they still say the same
    implied = missing_implied_opsets(proto)  # e.g. com.microsoft nodes from ORT's transformer optimizer
    defaults = missing_spec_defaults(proto)  # e.g. STFT's onesided, which onnx's inference reads as 0
    if implied or defaults:
        proto = copy_model(proto) if proto is source else proto
        add_implied_opsets(proto, implied)
        write_spec_defaults(proto)
        data = None
    proto, data = _sorted_and_checked(proto, source, mapped, sort=sort, check=check, data=data)
    if proto.functions:
        data = None
        try:
            proto = onnx_api.inline_local_functions(proto)
        except Exception as e:  # pragma: no cover - depends on onnx internals
            raise ModelLoadError(f"could not inline the model's local functions: {first_line(e)}") from e
    typed = infer_shapes == "missing" and _fully_typed(proto.graph)  # no inference: one pass checks the types too
    walk = validate_model(proto, types=typed)  # attributes and arity native shape inference and backends trust
    owned = proto is not source  # never modify a ModelProto the caller handed us
    if has_unknown_dims(proto):
        if not owned:
            proto, owned = copy_model(proto), True
        clear_unknown_dims(proto)
        data = None
    if input_shapes:
        if not owned:
            proto, owned = copy_model(proto), True
        apply_input_shapes(proto, input_shapes)
        data = None
    declared: dict[str, P.TypeProto] = {}
    if infer_shapes and not typed and _declares_output_shapes(proto.graph):
        if not owned:
            proto, owned = copy_model(proto), True
        declared, data = declared_outputs.set_aside(proto.graph), None  # inferred as computed, then compared
    if infer_shapes and not typed:
        try:  # the file's bytes (the same message) or, for a large model, the model without its weights
            proto = infer_shapes_lean(proto, data, owned=owned)
        except Exception as e:
            log.warning("ONNX shape inference failed, continuing without it: %s", first_line(e))
            declared_outputs.restore(proto.graph, declared)
            declared = {}
        # element types against the schemas' constraints (inference adds types, not nodes: the walk's nodes)
        validate_model(proto, types=True, structure=False, walk=walk)
    declared_outputs.keep_element_types(proto.graph, declared)
    model = model_from_proto(proto, mapped)
    complete_contrib_types(model.graph, model.opset_imports)  # onnx's inference knows no com.microsoft op
    declared_outputs.reconcile(model.graph, declared)  # after every inferred type is in
    model.base_dir = base_dir
    return model


def _declares_output_shapes(g: P.GraphProto) -> bool:
    return any(vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape") for vi in g.output)


def _sorted_and_checked(proto: P.ModelProto, source: ModelSource, mapped: Mapping[str, np.ndarray], *,
                        sort: bool, check: bool, data: bytes | None = None) -> tuple[P.ModelProto, bytes | None]:
    """``proto`` with its nodes in a valid order (sorted on a copy when
    ``sort`` and they are not: ONNX Runtime accepts unsorted graphs, e.g. from
    fp16 converters, so do we) and, with ``check``, passed by the checker.
    The checker refuses unsorted graphs, so a graph it passes needs no order
    check: the order is looked at only when it fails (or with no checker).
    ``data``: the bytes ``proto`` was parsed from, which the checker then
    reads (a serialization of ``proto`` parses to the same message); returned
    as ``None`` once the nodes were sorted."""
    if check:
        try:
            _check(proto, mapped, data)
            return proto, data
        except ModelLoadError:
            if not (sort and _needs_sorting(proto)):
                raise
    elif not (sort and _needs_sorting(proto)):
        return proto, data
    proto = copy_model(proto) if proto is source else proto
    sort_nodes(proto.graph)
    if check:
        _check(proto, mapped)
    return proto, None


def _check(proto: P.ModelProto, mapped: Mapping[str, np.ndarray], data: bytes | None = None) -> None:
    try:
        onnx_api.check_model(for_checker(proto) if mapped else proto if data is None else data)
    except (onnx_api.ValidationError, ValueError) as e:
        raise ModelLoadError(f"ONNX model is invalid: {first_line(e)}") from e


def _fully_typed(g: P.GraphProto) -> bool:
    """Every node output of ``g`` declares a tensor element type and no node has sub-graphs."""
    typed = {vi.name for vi in [*g.value_info, *g.output]
             if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type}
    return all(o in typed or not o for n in g.node for o in n.output) and \
        not any(a.type in (P.AttributeProto.GRAPH, P.AttributeProto.GRAPHS) for n in g.node for a in n.attribute)


# -------------------------------------------------------- node order
def _node_reads(n: P.NodeProto) -> Iterator[str]:
    """Names ``n`` reads: its inputs and what its sub-graphs read from outside."""
    yield from (x for x in n.input if x)
    for g in subgraphs(n):
        inner = {x.name for x in g.input} | {t.name for t in g.initializer} | {o for m in g.node for o in m.output}
        for m in g.node:
            yield from (x for x in _node_reads(m) if x not in inner)


def _unsorted(g: P.GraphProto, outer: set[str]) -> bool:
    known = set(outer) | {x.name for x in g.input} | {t.name for t in g.initializer}
    nodes = list(g.node)
    produced = {o for n in nodes for o in n.output}
    produced.discard("")  # omitted optional outputs; omitted inputs ("") are never out of order
    for n in nodes:
        subs = list(subgraphs(n)) if len(n.attribute) else ()
        for x in (_node_reads(n) if subs else n.input):
            if x in produced and x not in known:
                return True
        known.update(n.output)
        if any(_unsorted(sub, known) for sub in subs):
            return True
    return False


def _needs_sorting(proto: P.ModelProto) -> bool:
    return _unsorted(proto.graph, set())


def sort_nodes(g: P.GraphProto) -> None:
    """Put the nodes of ``g`` (and of its sub-graphs) in a topological order,
    in place, keeping the given order wherever it is already valid.  Names no
    node produces (inputs, initializers, outer values) count as available;
    a cycle leaves the remaining nodes in their order (the checker reports it)."""
    for n in g.node:
        for sub in subgraphs(n):
            sort_nodes(sub)
    nodes = list(g.node)
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    deps = [{producer[x] for x in _node_reads(n) if x in producer and producer[x] != i}
            for i, n in enumerate(nodes)]
    users: list[list[int]] = [[] for _ in nodes]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    missing = [len(d) for d in deps]
    ready = [i for i, m in enumerate(missing) if m == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(nodes):  # a cycle: keep the rest as it was
        done = set(order)
        order += [i for i in range(len(nodes)) if i not in done]
    sorted_nodes = [nodes[i] for i in order]
    copies = [P.NodeProto() for _ in sorted_nodes]
    for c, n in zip(copies, sorted_nodes):
        c.CopyFrom(n)
    del g.node[:]
    g.node.extend(copies)
