"""Nodes onnxruntime would crash on (a native fault, not an error): declined
before any probe or session sees them, whatever the options.

ORT checks that a required single input is present, but not the members of
a variadic input: a ``Min``/``Max``/``Mean``/``Sum``/``Concat`` with an empty
name among its variadic inputs dereferences a missing tensor (SIGSEGV, seen
with onnxruntime 1.32).  The reason shows in the placement report like any
other decline, and the node goes to the backup backend (which rejects it
with an error naming the input).
"""
from __future__ import annotations

from nnrt_core.frontends.onnx import onnx_schema
from nnrt_core.ir import Node

__all__ = ["crash_risk"]


def _first_variadic(node: Node) -> int | None:
    """The input position where the node's variadic parameter starts (``None``: none, or no onnx schema)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    schema = onnx_schema(node.op_type, domain, node.opset) if node.opset is not None else None
    if schema is None:
        return None
    for i, p in enumerate(schema.inputs):
        if p.option == p.option.Variadic:
            return i
    return None


def crash_risk(node: Node) -> str | None:
    """Why ORT must not see ``node`` (a reason for the placement report), or ``None``."""
    empty = [i for i, v in enumerate(node.inputs) if v is None]
    if not empty:
        return None
    start = _first_variadic(node)
    bad = [i for i in empty if start is not None and i >= start]
    if bad:
        return (f"input {bad[0]} of {node.op_type}'s variadic inputs is empty "
                "(onnxruntime would crash on it: a missing variadic input is not checked)")
    return None
