"""Opset imports ONNX Runtime implies: a model whose nodes use ONNX Runtime's
contrib domain without importing it (what ``onnxruntime.transformers``'
optimizer writes) runs on ONNX Runtime, which imports every domain it
registers at its newest version; the ONNX checker refuses it. We add the
missing import the same way (logged), before the checker sees the model."""
from __future__ import annotations

from typing import Iterator

from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.protos import subgraphs
from nnrt_core.logs import get_logger

__all__ = ["IMPLIED_OPSETS", "missing_implied_opsets", "add_implied_opsets"]

log = get_logger("nnrt.onnx")

#: domain -> the version ONNX Runtime gives it when a model does not import it
IMPLIED_OPSETS = {"com.microsoft": 1, "com.microsoft.nchwc": 1}


def _domains(g: P.GraphProto) -> Iterator[str]:
    for n in g.node:
        yield n.domain
        for sub in subgraphs(n):
            yield from _domains(sub)


def missing_implied_opsets(proto: P.ModelProto) -> list[str]:
    """The implied domains ``proto``'s nodes use without importing them."""
    if not proto.HasField("graph"):
        return []
    imported = {o.domain for o in proto.opset_import}
    used = set(_domains(proto.graph))
    return sorted(d for d in used if d in IMPLIED_OPSETS and d not in imported)


def add_implied_opsets(proto: P.ModelProto, domains: list[str]) -> None:
    """Import ``domains`` (from :func:`missing_implied_opsets`) into ``proto`` in place."""
    for d in domains:
        op = proto.opset_import.add()
        op.domain, op.version = d, IMPLIED_OPSETS[d]
        log.info("model uses domain %r without importing it; imported at version %d as ONNX Runtime does",
                 d, IMPLIED_OPSETS[d])
