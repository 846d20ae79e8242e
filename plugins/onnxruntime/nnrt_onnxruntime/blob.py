"""The serialized form of an ONNX Runtime partition: ``MAGIC | u32 header
length | JSON header | ONNX model bytes | weights``."""
from __future__ import annotations

import json
import struct
from typing import Any, Mapping

from nnrt_core.errors import CompileError

__all__ = ["MAGIC", "BLOB_FORMAT", "pack_blob", "unpack_blob"]

MAGIC = b"NNRTORT\x01"
#: 1: the partition's ONNX model; 2: adds ``model_length`` and, optionally,
#: ORT's optimized graph with its weights region (see :mod:`.offline`)
BLOB_FORMAT = 2


def pack_blob(header: Mapping[str, Any], model: bytes, weights: bytes = b"") -> bytes:
    """``MAGIC | u32 header length | JSON header | ONNX model bytes | weights``.

    ``header["model_length"]`` says where the model ends; the weights region
    (ORT's optimized graph's external data, see :mod:`.offline`) follows."""
    h = json.dumps({**header, "model_length": len(model)}, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(h)) + h + model + weights


def unpack_blob(blob: bytes) -> tuple[dict[str, Any], bytes, memoryview]:
    """(header, model bytes, weights region as a view of ``blob``)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise CompileError(f"compiled onnxruntime partition must be bytes, got {type(blob).__name__}")
    blob = memoryview(blob).cast("B")  # the model is copied once, below; the weights not at all
    if bytes(blob[:len(MAGIC)]) != MAGIC or len(blob) < len(MAGIC) + 4:
        raise CompileError("not a compiled onnxruntime partition (bad header)")
    (n,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(bytes(blob[start:start + n]))
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
        for key in ("name", "inputs", "outputs"):
            if key not in header:
                raise ValueError(f"header lacks {key!r}")
        if int(header.get("format", 1)) > BLOB_FORMAT:
            raise CompileError(f"compiled onnxruntime partition has format {header['format']}, newer than this "
                               f"plugin reads ({BLOB_FORMAT}); upgrade nnrt-backend-onnxruntime or recompile")
        body = blob[start + n:]
        mlen = int(header.get("model_length", len(body)))
        if not 0 <= mlen <= len(body):
            raise ValueError(f"model length {mlen} exceeds the {len(body)} bytes stored")
    except (ValueError, TypeError) as e:
        raise CompileError(f"compiled onnxruntime partition has a corrupt header: {e}") from e
    return header, bytes(body[:mlen]), body[mlen:]  # onnxruntime takes bytes only
