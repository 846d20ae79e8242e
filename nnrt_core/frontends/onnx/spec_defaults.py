"""Attribute defaults the ONNX spec states but ``onnx``'s shape inference
reads differently, written out explicitly before inference.

STFT: the spec's ``onesided`` defaults to 1 (and ONNX Runtime computes a
one-sided spectrum without the attribute), but onnx 1.23's inference takes
0, so a vocoder's STFT would be given ``n_fft`` bins instead of
``n_fft // 2 + 1``. Writing ``onesided=1`` changes no result."""
from __future__ import annotations

from typing import Iterator

from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.protos import subgraphs

__all__ = ["SPEC_DEFAULTS", "missing_spec_defaults", "write_spec_defaults"]

#: (domain, op type) -> {attribute: the spec's default (an int)}
SPEC_DEFAULTS: dict[tuple[str, str], dict[str, int]] = {("", "STFT"): {"onesided": 1}}


def _nodes(g: P.GraphProto) -> Iterator[P.NodeProto]:
    for n in g.node:
        yield n
        for sub in subgraphs(n):
            yield from _nodes(sub)


def _missing(n: P.NodeProto) -> list[str]:
    defaults = SPEC_DEFAULTS.get(("" if n.domain == "ai.onnx" else n.domain, n.op_type))
    if not defaults:
        return []
    have = {a.name for a in n.attribute}
    return [a for a in defaults if a not in have]


def missing_spec_defaults(proto: P.ModelProto) -> bool:
    """Whether some node of ``proto`` omits an attribute of :data:`SPEC_DEFAULTS`."""
    return proto.HasField("graph") and any(_missing(n) for n in _nodes(proto.graph))


def write_spec_defaults(proto: P.ModelProto) -> int:
    """Write the omitted :data:`SPEC_DEFAULTS` attributes into ``proto`` in place; how many."""
    count = 0
    for n in _nodes(proto.graph):
        for name in _missing(n):
            a = n.attribute.add()
            a.name, a.type = name, P.AttributeProto.INT
            a.i = SPEC_DEFAULTS[("" if n.domain == "ai.onnx" else n.domain, n.op_type)][name]
            count += 1
    return count
