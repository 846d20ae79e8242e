"""What the node checks read of an onnx ``OpSchema``, copied out once per
(op, domain, opset): reading the pybind ``OpSchema`` properties builds new
Python objects on every access, which made validation cost ~25 us a node.
Named tuples, not dataclasses: a dataclass costs ~0.6 ms to define, at import."""
from __future__ import annotations

import functools
from typing import NamedTuple

from nnrt_core.frontends.onnx.schemas import onnx_schema

__all__ = ["Formal", "SchemaFacts", "schema_facts"]


class Formal(NamedTuple):
    """One formal input of a schema."""

    name: str
    type_str: str
    variadic: bool
    is_homogeneous: bool


class SchemaFacts(NamedTuple):
    """The parts of an ``OpSchema`` the checks use, as plain Python values."""

    since_version: int
    min_input: int
    max_input: int
    min_output: int
    max_output: int
    inputs: tuple[Formal, ...]
    #: attribute name -> ``AttributeProto`` type (UNDEFINED: any)
    attributes: dict[str, int]
    #: type parameter -> allowed type strings
    allowed: dict[str, frozenset[str]]


@functools.lru_cache(maxsize=4096)
def schema_facts(op_type: str, domain: str, opset: int) -> SchemaFacts | None:
    """:class:`SchemaFacts` of onnx's newest schema of ``op_type`` whose
    version is <= ``opset`` (``None`` without one)."""
    s = onnx_schema(op_type, domain, opset)
    if s is None:
        return None
    variadic = type(s).FormalParameterOption.Variadic
    inputs = tuple(Formal(p.name, p.type_str, p.option == variadic, bool(p.is_homogeneous)) for p in s.inputs)
    return SchemaFacts(int(s.since_version), int(s.min_input), int(s.max_input), int(s.min_output),
                       int(s.max_output), inputs, {k: int(a.type) for k, a in s.attributes.items()},
                       {c.type_param_str: frozenset(c.allowed_type_strs) for c in s.type_constraints})
