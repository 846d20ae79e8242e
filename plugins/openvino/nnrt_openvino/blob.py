"""The bytes of a compiled OpenVINO partition (model cache, offline files).

``MAGIC | u32 header length | JSON header | ONNX model | OpenVINO export``:
the ONNX model is the portable form (compiled again anywhere); the export
(``CompiledModel.export_model``) loads without compiling, but only into the
same OpenVINO version, device and compile config, which the header records.
"""
from __future__ import annotations

import json
import struct
from typing import Any, Mapping

from nnrt_openvino._core import CompileError

__all__ = ["MAGIC", "BLOB_FORMAT", "pack_blob", "unpack_blob"]

MAGIC = b"NNRTOV\x01\x00"
BLOB_FORMAT = 1
_REQUIRED = ("name", "inputs", "outputs", "onnx_length", "export_length")


def pack_blob(header: Mapping[str, Any], onnx_bytes: bytes, exported: bytes) -> bytes:
    h = json.dumps({**header, "format": BLOB_FORMAT, "onnx_length": len(onnx_bytes),
                    "export_length": len(exported)}, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(h)) + h + onnx_bytes + exported


def unpack_blob(blob: Any) -> tuple[dict[str, Any], bytes, bytes]:
    """(header, ONNX bytes, export bytes); :class:`CompileError` for anything malformed."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise CompileError(f"compiled openvino partition must be bytes, got {type(blob).__name__}")
    view = memoryview(blob).cast("B")
    start = len(MAGIC) + 4
    if len(view) < start or bytes(view[:len(MAGIC)]) != MAGIC:
        raise CompileError("not a compiled openvino partition (bad header)")
    (n,) = struct.unpack_from("<I", view, len(MAGIC))
    if n > len(view) - start:
        raise CompileError(f"compiled openvino partition has a header of {n} bytes but only {len(view) - start} follow")
    try:
        header = json.loads(bytes(view[start:start + n]))
        if not isinstance(header, dict) or any(k not in header for k in _REQUIRED):
            raise ValueError(f"header lacks one of {_REQUIRED}")
        if int(header.get("format", 0)) > BLOB_FORMAT:
            raise CompileError(f"compiled openvino partition has format {header['format']}, newer than this plugin "
                               f"reads ({BLOB_FORMAT}); upgrade nnrt-backend-openvino or recompile")
        a, b = int(header["onnx_length"]), int(header["export_length"])
        body = view[start + n:]
        if a < 0 or b < 0 or a + b != len(body):
            raise ValueError(f"section lengths {a} + {b} do not match the {len(body)} bytes stored")
        if not (isinstance(header["inputs"], list) and isinstance(header["outputs"], list)):
            raise ValueError("inputs/outputs are not lists")
    except (ValueError, TypeError) as e:
        raise CompileError(f"compiled openvino partition has a corrupt header: {e}") from e
    return header, bytes(body[:a]), bytes(body[a:])
