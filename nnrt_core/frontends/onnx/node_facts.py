"""The memo of node validation: a node whose checked facts equal those of
a node that passed :func:`~nnrt_core.frontends.onnx.validate.validate_node`
before passes too, so ``validate_graph`` (IR nodes) and ``validate_model``
(proto nodes: the many alike nodes of one model, each pass) check it only
once per process.  A failing node is never remembered (it is checked, and
named, every time)."""
from __future__ import annotations

from typing import Any

from nnrt_core.ir import AttrKind, Node, TensorType

__all__ = ["PASSED", "PASSED_MAX", "facts_key", "proto_facts_key", "remember"]

#: facts keys of IR nodes that passed validation (bounded: cleared when full)
PASSED: set[tuple] = set()
PASSED_MAX = 16384

_LIST_KINDS = frozenset({int(AttrKind.INTS), int(AttrKind.STRINGS), int(AttrKind.FLOATS)})
_SCALAR_KINDS = frozenset({int(AttrKind.INT), int(AttrKind.STRING)})
_TENSOR = int(AttrKind.TENSOR)


def facts_key(node: Node, domain: str, version: int) -> tuple:
    """Everything ``validate_node`` reads of an IR node except its name: op,
    domain, opset, which inputs/outputs are named, input element types and the
    attributes as checked (kinds; INT/INTS/STRING(S)/FLOATS values; a tensor's
    size).  Not hashed here (a lookup hashes it): a value that cannot be hashed
    raises ``TypeError`` there, and the node is then checked."""
    attrs = []
    for a in node.attributes.values():
        if a.ref_attr_name:
            continue
        kind, value = int(a.kind), a.value
        if kind in _LIST_KINDS:
            value = tuple(value.tolist() if hasattr(value, "tolist") else value)
        elif kind == _TENSOR:
            value = int(getattr(value, "size", 1))
        elif kind not in _SCALAR_KINDS:
            value = None
        attrs.append((a.name, kind, value))
    elems, named = [], []  # one pass over the inputs (element type, named or not)
    for v in node.inputs:
        if v is None:
            elems.append(None)
            named.append(False)
            continue
        t = v.type
        elems.append(None if t is None else int(t.dtype) if isinstance(t, TensorType) else -1)
        named.append(bool(v.name))
    return (node.op_type, domain, version, tuple(attrs), tuple(elems), tuple(named),
            tuple([bool(v.name) for v in node.outputs]))


def proto_facts_key(op_type: str, domain: str, version: int | None, attrs: tuple[tuple[str, int, Any], ...],
                    input_types: tuple[int | None, ...], named_inputs: tuple[bool, ...], n_outputs: int,
                    structure: bool) -> tuple:
    """The facts key of a proto node checked against opset ``version``
    (``structure``: as ``validate_node`` is called): all its ``NodeView``
    gives the checks (``attrs``: its ``(name, type, value)`` triples, list
    values as tuples) but the node's name and value names (which inputs are
    named, the number of outputs).  Tagged "proto": never an IR node's key."""
    return ("proto", structure, op_type, domain, version, attrs, input_types, named_inputs, n_outputs)


def remember(key: tuple) -> None:
    """Record a key whose node passed."""
    if len(PASSED) >= PASSED_MAX:
        PASSED.clear()
    PASSED.add(key)
