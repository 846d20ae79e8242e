"""The NumPy backend's stored partitions (offline files, the model cache,
Ray's shipped sessions)::

    MAGIC  u32 header length  JSON header  ONNX model  weights region

The model is the partition's graph as ONNX with every initializer of 4 KiB
or more left out as external data at location ``weights.bin``, which is the
region after it (each tensor 64-byte aligned within the region).  Loading
parses and checks the small model like any untrusted one (checker,
validation, shape inference) and views the weights in the region without a
copy: a 100 MB ResNet50 partition no longer goes through protobuf four
times.  A blob without the magic is a plain ONNX model (files written
before this format) and still loads.
"""
from __future__ import annotations

import json
import struct
from typing import Any

from nnrt_core.errors import CompileError
from nnrt_core.frontends import ExternalWeights, load_onnx, to_onnx
from nnrt_core.ir import Graph

__all__ = ["MAGIC", "WEIGHTS", "pack", "unpack"]

MAGIC = b"NNRTNPY\x01"
WEIGHTS = "weights.bin"
#: smaller initializers stay in the model (shape inference reads small constants)
MIN_EXTERNAL_BYTES = 4096
_LEN = struct.Struct("<I")


def pack(graph: Graph) -> bytes:
    """``graph`` stored: its ONNX model with the large weights in a region after it."""
    external = ExternalWeights(WEIGHTS, MIN_EXTERNAL_BYTES)
    model = to_onnx(graph, external=external).SerializeToString()
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
        mlen = head["model_length"] if isinstance(head, dict) else None
        if head.get("format") != 1 or head.get("weights") != WEIGHTS:
            raise ValueError(f"unknown format or weights location in {head!r}")
        if type(mlen) is not int or not 0 <= mlen <= len(view) - start - n:
            raise ValueError(f"model length {mlen!r} does not fit the {len(view) - start - n} bytes stored")
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise CompileError(f"stored numpy partition has a malformed header: {e}") from None
    body = view[start + n:]
    return load_onnx(bytes(body[:mlen]), weights={WEIGHTS: body[mlen:]}).graph
