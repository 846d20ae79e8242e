"""The NumPy backend's stored partitions (offline files, the model cache,
Ray's shipped sessions)::

    MAGIC  u32 header length  JSON header  [ONNX model]  weights region

Format 2 (written whenever it holds the graph): the header is the IR graph
as data and the region holds every constant (see
:mod:`nnrt_numpy.stored_graph`); a warm load decodes it with no ONNX parse,
checker, conversion or shape inference.

Format 1 (written for graphs format 2 does not hold: sub-graphs, tensor or
graph attributes, string constants; files of earlier versions): the model is
the partition's graph as ONNX with every initializer of 4 KiB or more left
out as external data at location ``weights.bin``, which is the region after
it (each tensor 64-byte aligned within the region).  Loading parses and
checks the small model like any untrusted one (checker, schema validation
with element types; written sorted and typed, it is not sorted again, an
unsorted one is refused, and shape inference runs only where a type is
missing) and views the weights in the region without a copy.

Both formats store the constant ``B`` of a ``Gemm`` with ``transB=1`` (read
by nothing else) transposed (``transB=0``, the same product): the kernel,
which wants it row-major, then uses the stored bytes instead of making a
transposed copy at every load (ResNet50's classifier: 8 MB, 10 to 20 ms).  A
blob without the magic is a plain ONNX model (files written before these
formats) and still loads.
"""
from __future__ import annotations

import json
import struct
from collections import Counter
from typing import Any, Iterator

import numpy as np

from nnrt_core.errors import CompileError
from nnrt_core.plugin_api import ExternalWeights, load_onnx, to_onnx
from nnrt_core.plugin_api import P
from nnrt_core.ir import Graph
from nnrt_numpy.relayout import transposed
from nnrt_numpy.stored_graph import FORMAT, encode_header, graph_from_header, graph_header, region_bytes

__all__ = ["MAGIC", "WEIGHTS", "pack", "pack_onnx", "unpack"]

MAGIC = b"NNRTNPY\x01"
WEIGHTS = "weights.bin"
#: smaller initializers stay in the model (shape inference reads small constants)
MIN_EXTERNAL_BYTES = 4096
_LEN = struct.Struct("<I")


def pack(graph: Graph) -> bytes:
    """``graph`` stored: as data (format 2, :mod:`nnrt_numpy.stored_graph`)
    where that format holds it, else as its ONNX model with the large weights
    in a region after it (format 1)."""
    stored = graph_header(graph)
    if stored is not None:
        head, arrays = stored
        data = encode_header(head, len(MAGIC) + _LEN.size)
        return b"".join([MAGIC, _LEN.pack(len(data)), data, region_bytes(arrays)])
    return pack_onnx(graph)


def pack_onnx(graph: Graph) -> bytes:
    """``graph`` in format 1: its ONNX model with the large weights in a region after it."""
    external = ExternalWeights(WEIGHTS, MIN_EXTERNAL_BYTES)
    proto = to_onnx(graph, external=external)
    _gemm_weights_transposed(proto, external)
    model = proto.SerializeToString()
    head = json.dumps({"format": 1, "model_length": len(model), "weights": WEIGHTS}).encode()
    return b"".join([MAGIC, _LEN.pack(len(head)), head, model, external.region()])


def unpack(blob: Any) -> Graph:
    """The graph of a stored partition (or of a plain ONNX model's bytes);
    :class:`CompileError` for a malformed header, the loader's errors for the model."""
    view = memoryview(blob).cast("B")
    if bytes(view[:len(MAGIC)]) != MAGIC:
        return load_onnx(bytes(view)).graph  # a plain ONNX model: the older stored form
    start = len(MAGIC) + _LEN.size
    if len(view) < start:
        raise CompileError("stored numpy partition is truncated (no header length)")
    (n,) = _LEN.unpack_from(view, len(MAGIC))
    try:
        head = json.loads(bytes(view[start:start + n]))
        if isinstance(head, dict) and head.get("format") == FORMAT:  # the graph as data
            return graph_from_header(head, view[start + n:])
        if not isinstance(head, dict):
            raise ValueError(f"the header is a {type(head).__name__}, not an object")
        mlen = head.get("model_length")
        if head.get("format") != 1 or head.get("weights") != WEIGHTS:
            raise ValueError(f"unknown format {head.get('format')!r} or weights location {head.get('weights')!r} "
                             f"(this plugin reads formats 1 and {FORMAT})")
        if type(mlen) is not int or not 0 <= mlen <= len(view) - start - n:
            raise ValueError(f"model length {mlen!r} does not fit the {len(view) - start - n} bytes stored")
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise CompileError(f"stored numpy partition has a malformed header: {e}") from None
    body = view[start + n:]
    # written sorted and fully typed: an unsorted graph is refused by the checker, not sorted; shape inference
    # only fills types the file lacks (element types are still checked against the schemas)
    return load_onnx(bytes(body[:mlen]), weights={WEIGHTS: body[mlen:]}, sort=False, infer_shapes="missing").graph


def _gemm_weights_transposed(proto: P.ModelProto, external: ExternalWeights) -> None:
    """Store each external ``B`` read by one ``Gemm`` (``transB=1``) and
    nothing else as ``B`` transposed, that ``Gemm`` with ``transB=0``."""
    g = proto.graph
    index = {n: i for i, n in enumerate(external.names)}
    uses = Counter(x for n in _nodes(g) for x in n.input)
    uses.update(v.name for v in [*g.input, *g.output])
    inits = {t.name: t for t in g.initializer}
    for node in g.node:
        if node.op_type != "Gemm" or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        b = node.input[1]
        trans = next((a for a in node.attribute if a.name == "transB"), None)
        if trans is None or trans.i != 1 or b not in index or uses[b] != 1 or len(inits[b].dims) != 2:
            continue
        i = index[b]
        external.arrays[i] = transposed(external.arrays[i])  # same bytes count: same offset
        inits[b].dims[:] = list(external.arrays[i].shape)
        trans.i = 0


def _nodes(graph: P.GraphProto) -> Iterator[P.NodeProto]:
    """Every node of ``graph`` and of its sub-graphs."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            for sub in ([a.g] if a.type == P.AttributeProto.GRAPH else list(a.graphs)):
                yield from _nodes(sub)
