"""Operator schemas for the graph builder: lookup, attribute conversion, input
checks and per-node type/shape inference.

Operators of the ONNX domains are checked against ``onnx.defs``; operators of
other domains (``com.microsoft``...) against the contrib schemas of ONNX
Runtime when it is installed (arity, attributes and type constraints only:
their output shapes are not inferred).  Schema lookup and inference go
through :mod:`nnrt_core.frontends.onnx`.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from nnrt_core.errors import GraphError, ModelLoadError
from nnrt_core.frontends.onnx import (
    NodeInferenceError,
    has_onnx_op,
    infer_node_types,
    ir_node_view,
    newest_domain_version,
    newest_opset_version,
    oldest_onnx_version,
    onnx_domains,
    onnx_op_names,
    onnx_schema,
    onnxruntime_schemas,
    validate_node,
)
from nnrt_core.ir import (
    Attribute,
    AttrKind,
    DataType,
    Graph,
    Model,
    OptionalType,
    SequenceType,
    TensorType,
    Value,
    ValueType,
)

__all__ = [
    "BuilderError",
    "OpSpec",
    "find_schema",
    "known_operators",
    "newest_opset",
    "convert_attribute",
    "type_string",
    "check_inputs",
    "infer_output_types",
]

#: constant inputs up to this many elements are handed to shape inference
#: (shape tensors of Reshape, Slice, Pad...); bigger ones (weights) are not
MAX_INFERENCE_DATA = 4096


class BuilderError(GraphError, ValueError):
    """A :class:`~nnrt_core.builder.GraphBuilder` call got inputs, attributes or
    names that violate the operator's schema or the graph's rules."""


@dataclass(frozen=True)
class OpSpec:
    """The schema of one operator version, from ONNX or ONNX Runtime."""

    schema: Any  #: an ``onnx.defs.OpSchema`` or an onnxruntime ``OpSchema``
    source: str  #: "onnx" or "onnxruntime"

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def since_version(self) -> int:
        return int(self.schema.since_version)

    @property
    def inferable(self) -> bool:
        """True when output types and shapes can be inferred per node."""
        return self.source == "onnx"

    def attribute_kinds(self) -> dict[str, tuple[AttrKind, bool]]:
        """attribute name -> (kind, required)."""
        return {name: (AttrKind[a.type.name], bool(a.required)) for name, a in self.schema.attributes.items()}

    def formal_inputs(self) -> list[tuple[str, str, str]]:
        """(name, type string, option) per formal input; option is Single,
        Optional or Variadic."""
        return [(p.name, _param_type(p), p.option.name) for p in self.schema.inputs]

    def formal_outputs(self) -> list[tuple[str, str, str]]:
        return [(p.name, _param_type(p), p.option.name) for p in self.schema.outputs]

    def type_constraints(self) -> dict[str, list[str]]:
        return {c.type_param_str: list(c.allowed_type_strs) for c in self.schema.type_constraints}

    def homogeneous(self, index: int) -> bool:
        params = self.schema.inputs
        p = params[min(index, len(params) - 1)]
        return bool(getattr(p, "is_homogeneous", getattr(p, "isHomogeneous", True)))


def _param_type(p: Any) -> str:
    return getattr(p, "type_str", None) or getattr(p, "typeStr", "")


# ------------------------------------------------------------------ lookup
def known_operators(domain: str = "") -> tuple[str, ...]:
    """Every operator name the builder can validate in ``domain``."""
    contrib = {op for d, op in onnxruntime_schemas() if d == domain}
    if domain in onnx_domains():
        return tuple(sorted(set(onnx_op_names(domain)) | contrib))
    return tuple(sorted(contrib))


def newest_opset(domain: str) -> int:
    """The newest version of ``domain`` the installed onnx (or onnxruntime,
    for its contrib domains) knows."""
    if domain in onnx_domains():
        return newest_opset_version() if domain == "" else newest_domain_version(domain)
    return max((s.since_version for (d, _), ss in onnxruntime_schemas().items() if d == domain for s in ss),
               default=1)


def find_schema(op_type: str, domain: str, opset: int) -> OpSpec:
    """The newest schema of ``op_type`` whose version is <= ``opset``;
    :class:`BuilderError` with the closest known names otherwise."""
    if domain in onnx_domains():
        schema = onnx_schema(op_type, domain, opset)
        if schema is not None:
            return OpSpec(schema, "onnx")
        contrib = [s for s in onnxruntime_schemas().get((domain, op_type), []) if s.since_version <= opset]
        if contrib:  # an onnxruntime operator in an ONNX domain (SimplifiedLayerNormalization)
            return OpSpec(contrib[-1], "onnxruntime")
        if has_onnx_op(op_type, domain):
            first = onnx_schema(op_type, domain, newest_opset_version())
            oldest = oldest_onnx_version(op_type, domain)
            raise BuilderError(f"operator {op_type!r} exists from opset {oldest} of domain "
                               f"{domain or 'ai.onnx'!r}; the builder uses opset {opset} "
                               f"(newest schema: version {first.since_version})")
    else:
        versions = [s for s in onnxruntime_schemas().get((domain, op_type), []) if s.since_version <= opset]
        if versions:
            return OpSpec(versions[-1], "onnxruntime")
        if not onnxruntime_schemas():
            raise BuilderError(f"operator {op_type!r} of domain {domain!r} cannot be validated: only ONNX "
                               "domains are known without onnxruntime installed")
    raise BuilderError(_unknown_message(op_type, domain))


def _unknown_message(op_type: str, domain: str) -> str:
    names = known_operators(domain)
    where = f"domain {domain or 'ai.onnx'!r}"
    if not names:
        return f"unknown operator {op_type!r}: no schema is known for {where}"
    close = difflib.get_close_matches(op_type, names, n=5, cutoff=0.5)
    lower = {n.lower(): n for n in names}
    if op_type.lower() in lower:  # a case slip first
        exact = lower[op_type.lower()]
        close = [exact] + [c for c in close if c != exact]
    hint = f"; did you mean {', '.join(close)}?" if close else f"; {len(names)} operators are known there"
    return f"unknown operator {op_type!r} in {where}{hint}"


# -------------------------------------------------------------- attributes
def convert_attribute(name: str, value: Any, kind: AttrKind, where: str) -> Attribute:
    """A Python value as an IR attribute of ``kind``; :class:`BuilderError`
    naming ``where`` and the expected type when it does not fit."""

    def bad(expected: str) -> BuilderError:
        return BuilderError(f"{where}: attribute {name!r} expects {expected}, got {_describe(value)}")

    if kind == AttrKind.FLOAT:
        if not _is_real(value):
            raise bad("a float")
        return Attribute(name, kind, float(value))
    if kind == AttrKind.INT:
        if not _is_int(value):
            raise bad("an int")
        return Attribute(name, kind, int(value))
    if kind == AttrKind.STRING:
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if not isinstance(value, str):
            raise bad("a string")
        return Attribute(name, kind, value)
    if kind in (AttrKind.FLOATS, AttrKind.INTS, AttrKind.STRINGS):
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise bad(f"a list of {kind.name[:-1].lower()}s")
        if kind == AttrKind.FLOATS and all(_is_real(x) for x in value):
            return Attribute(name, kind, [float(x) for x in value])
        if kind == AttrKind.INTS and all(_is_int(x) for x in value):
            return Attribute(name, kind, [int(x) for x in value])
        if kind == AttrKind.STRINGS and all(isinstance(x, str) for x in value):
            return Attribute(name, kind, list(value))
        raise bad(f"a list of {kind.name[:-1].lower()}s")
    if kind == AttrKind.TENSOR:
        return Attribute(name, kind, _tensor_value(value, lambda: bad("an array")))
    if kind == AttrKind.TENSORS:
        if not isinstance(value, (list, tuple)):
            raise bad("a list of arrays")
        return Attribute(name, kind, [_tensor_value(x, lambda: bad("a list of arrays")) for x in value])
    if kind == AttrKind.GRAPH:
        if isinstance(value, Model):
            value = value.graph
        if not isinstance(value, Graph):
            raise bad("a Graph (e.g. GraphBuilder(...).build().graph)")
        return Attribute(name, kind, value)
    if kind == AttrKind.GRAPHS:
        graphs = [v.graph if isinstance(v, Model) else v for v in value] if isinstance(value, (list, tuple)) else None
        if graphs is None or not all(isinstance(g, Graph) for g in graphs):
            raise bad("a list of Graphs")
        return Attribute(name, kind, graphs)
    if kind == AttrKind.TYPE_PROTO:
        if not isinstance(value, (TensorType, SequenceType, OptionalType)):
            raise bad("an nnrt_core.ir TensorType, SequenceType or OptionalType")
        return Attribute(name, kind, value)
    if kind == AttrKind.TYPE_PROTOS:
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, (TensorType, SequenceType, OptionalType)) for v in value):
            raise bad("a list of nnrt_core.ir types")
        return Attribute(name, kind, list(value))
    raise BuilderError(f"{where}: attribute {name!r} has kind {kind.name}, which the builder cannot write")


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer, np.bool_))


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _tensor_value(value: Any, bad) -> np.ndarray:
    if isinstance(value, (str, bytes, dict, set)) or value is None:
        raise bad()
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        raise bad() from None
    if arr.dtype == object:
        raise bad()
    return arr


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


# ----------------------------------------------------------------- inputs
def type_string(t: ValueType | None) -> str | None:
    """ONNX's spelling of a value type ("tensor(float)", "seq(tensor(int64))")."""
    if isinstance(t, TensorType):
        return None if t.dtype == DataType.UNDEFINED else f"tensor({t.dtype.name.lower()})"
    if isinstance(t, SequenceType):
        inner = type_string(t.elem)
        return None if inner is None else f"seq({inner})"
    if isinstance(t, OptionalType):
        inner = type_string(t.elem)
        return None if inner is None else f"optional({inner})"
    return None


def check_inputs(spec: OpSpec, inputs: Sequence[Value | None], num_outputs: int, where: str) -> None:
    """Arity, required inputs and type constraints."""
    s = spec.schema
    n = len(inputs)
    if not s.min_input <= n <= s.max_input:
        raise BuilderError(f"{where}: takes {_arity(s.min_input, s.max_input)} input(s), got {n}")
    if not s.min_output <= num_outputs <= s.max_output:
        raise BuilderError(f"{where}: has {_arity(s.min_output, s.max_output)} output(s), "
                           f"asked for {num_outputs}")
    formal = spec.formal_inputs()
    if not formal:
        return
    constraints = spec.type_constraints()
    seen: dict[str, tuple[int, str]] = {}  # type parameter -> (input index, type string)
    for i, v in enumerate(inputs):
        pname, tparam, option = formal[min(i, len(formal) - 1)]
        label = f"input {i} ({pname})"
        if v is None:
            if option != "Optional":
                raise BuilderError(f"{where}: {label} is required")
            continue
        got = type_string(v.type)
        if got is None:
            continue
        allowed = constraints.get(tparam, [tparam] if "(" in tparam else None)
        if allowed is not None and got not in allowed:
            raise BuilderError(f"{where}: {label} {v.name!r} has type {got}; allowed: {', '.join(allowed)}")
        if tparam in constraints and (option != "Variadic" or spec.homogeneous(i)):
            if tparam in seen and seen[tparam][1] != got:
                j, other = seen[tparam]
                raise BuilderError(f"{where}: {label} {v.name!r} has type {got} but input {j} has {other}; "
                                   f"both are of type parameter {tparam} and must match")
            seen.setdefault(tparam, (i, got))


def _arity(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    return f"at least {lo}" if hi >= 2**31 - 1 else f"{lo} to {hi}"


# --------------------------------------------------------------- inference
def infer_output_types(
    spec: OpSpec,
    op_type: str,
    domain: str,
    inputs: Sequence[Value | None],
    output_names: Sequence[str],
    attributes: Sequence[Attribute],
    opsets: dict[str, int],
    where: str,
) -> list[ValueType | None]:
    """Output types of one node (ONNX per-node inference; a type-constraint
    based guess for schemas ONNX does not know).  The node first passes the
    checks of untrusted models (attribute ranges native inference trusts)."""
    try:
        validate_node(ir_node_view(where, op_type, domain, inputs, output_names, attributes), opsets)
    except ModelLoadError as e:
        raise BuilderError(str(e)) from e
    if not spec.inferable:
        return _guess_from_constraints(spec, inputs, len(output_names))
    types: dict[str, ValueType] = {}
    data: dict[str, np.ndarray] = {}
    for v in inputs:
        if v is None:
            continue
        if v.type is not None and type_string(v.type) is not None:
            types[v.name] = v.type
        if v.const is not None and v.const.size <= MAX_INFERENCE_DATA and v.const.dtype != object:
            data[v.name] = v.const
    try:
        return infer_node_types(spec.schema, op_type, domain, [v.name if v is not None else "" for v in inputs],
                                output_names, attributes, types, data, opsets)
    except NodeInferenceError as e:
        shown = ", ".join(f"{i}: {v.name!r} {v.type}" for i, v in enumerate(inputs) if v is not None)
        raise BuilderError(f"{where}: {e} (inputs {shown or 'none'})") from e
    except GraphError as e:  # an attribute ONNX cannot hold
        raise BuilderError(f"{where}: {e}") from e


def _guess_from_constraints(spec: OpSpec, inputs: Sequence[Value | None], count: int) -> list[ValueType | None]:
    formal_in = spec.formal_inputs()
    formal_out = spec.formal_outputs()
    constraints = spec.type_constraints()
    by_param: dict[str, DataType] = {}
    for i, v in enumerate(inputs):
        if v is not None and formal_in and isinstance(v.type, TensorType):
            by_param.setdefault(formal_in[min(i, len(formal_in) - 1)][1], v.type.dtype)
    out: list[ValueType | None] = []
    for k in range(count):
        if not formal_out:
            out.append(None)
            continue
        tparam = formal_out[min(k, len(formal_out) - 1)][1]
        dtype = by_param.get(tparam)
        allowed = constraints.get(tparam, [tparam])
        if dtype is None and len(allowed) == 1 and allowed[0].startswith("tensor("):
            dtype = _dtype_from_type_string(allowed[0])
        out.append(TensorType(dtype) if dtype is not None else None)
    return out


def _dtype_from_type_string(text: str) -> DataType | None:
    inner = text[len("tensor("):-1].upper()
    return DataType.__members__.get(inner)

