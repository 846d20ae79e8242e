"""Nodes onnxruntime would crash on (a native fault, not an error): declined
before any probe or session sees them, whatever the options.

ORT does not check every input its kernels require: a ``Min``/``Max``/
``Mean``/``Sum``/``Concat`` with an empty name among its variadic inputs, or
a ``LayerNormalization`` without its ``Scale``, dereferences a missing tensor
(SIGSEGV, seen with onnxruntime 1.32).  So a node with an empty name where
its onnx schema requires an input is declined; the reason shows in the
placement report like any other decline, and the node goes to the backup
backend (which rejects it with an error naming the input).  ``Resize``-11's
``roi`` and ``scales`` are the exception: exporters leave them empty and ORT
treats them as optional (onnx made them optional in opset 13).
"""
from __future__ import annotations

from nnrt_core.plugin_api import onnx_schema
from nnrt_core.ir import Node

__all__ = ["OMITTABLE", "crash_risk"]

#: op type -> input positions ORT accepts empty although the schema calls them required
OMITTABLE: dict[str, frozenset[int]] = {"Resize": frozenset({1, 2})}


def _required_positions(node: Node) -> set[int] | None:
    """Input positions the node's onnx schema requires (``None``: no schema)."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    schema = onnx_schema(node.op_type, domain, node.opset) if node.opset is not None else None
    if schema is None:
        return None
    formal = list(schema.inputs)
    required = set()
    for i in range(len(node.inputs)):
        p = formal[min(i, len(formal) - 1)] if formal else None
        if p is not None and (p.option == p.option.Variadic or (p.option == p.option.Single and i < len(formal))):
            required.add(i)
    return required - OMITTABLE.get(node.op_type, frozenset())


def crash_risk(node: Node) -> str | None:
    """Why ORT must not see ``node`` (a reason for the placement report), or ``None``."""
    empty = [i for i, v in enumerate(node.inputs) if v is None]
    if not empty:
        return None
    required = _required_positions(node)
    bad = [i for i in empty if required is not None and i in required]
    if bad:
        return (f"input {bad[0]} of {node.op_type} is empty but required "
                "(onnxruntime would crash on some missing required inputs: declined)")
    return None
