"""The offline model format (versioned, checksummed, no pickle).

Layout (little endian)::

    magic        8s   b"NNRTNPU\\0"
    version      u32  FORMAT_VERSION
    flags        u32  0
    header_len   u64
    weights_len  u64
    digest       32s  checksum of header + weights: XXH3-128 (zero padded)
                      in format 2, sha256 in format 1 (both are read)
    header       JSON (utf-8): chip id/digest, program (instructions, planned offsets, I/O specs)
    weights      raw bytes of the constant region
"""
from __future__ import annotations

import json
import struct
from typing import Any

from nnrt_core.plugin_api import checksum
from nnrt_core.errors import CompileError
from nnrt_npu_emu.program import Program

__all__ = ["MAGIC", "FORMAT_VERSION", "OfflineModelError", "encode", "decode"]

MAGIC = b"NNRTNPU\x00"
FORMAT_VERSION = 2
_FIXED = struct.Struct("<8sIIQQ32s")
#: the checksum each format version stores in the 32-byte digest field
_CHECKSUM = {1: "sha256", 2: "xxh3_128"}


def _digest(*parts: Any, version: int) -> bytes:
    return checksum.digest(*parts, algorithm=_CHECKSUM[version]).ljust(32, b"\0")


class OfflineModelError(CompileError):
    """An offline model blob is corrupted, truncated, too new or for another chip."""


def encode(program: Program, weights: bytes, meta: dict[str, Any]) -> bytes:
    header = json.dumps({"meta": meta, "program": program.to_dict()}, separators=(",", ":")).encode("utf-8")
    digest = _digest(header, weights, version=FORMAT_VERSION)
    return _FIXED.pack(MAGIC, FORMAT_VERSION, 0, len(header), len(weights), digest) + header + weights


def decode(blob: Any) -> tuple[dict[str, Any], Program, bytes]:
    """Validate ``blob`` and return (meta, program, weights); raises
    :class:`OfflineModelError` with the reason."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise OfflineModelError(f"an offline model must be bytes, got {type(blob).__name__}")
    blob = memoryview(blob).cast("B")  # no copy of the weights
    if len(blob) < _FIXED.size:
        if bytes(blob[:8]) != MAGIC[:min(len(blob), 8)] or not len(blob):
            raise OfflineModelError("not an nnrt NPU offline model (bad magic)")
        raise OfflineModelError(f"offline model is truncated ({len(blob)} bytes, header needs {_FIXED.size})")
    magic, version, flags, hlen, wlen, digest = _FIXED.unpack_from(blob)
    if magic != MAGIC:
        raise OfflineModelError("not an nnrt NPU offline model (bad magic)")
    if version > FORMAT_VERSION:
        raise OfflineModelError(
            f"offline model format version {version} is newer than this emulator supports ({FORMAT_VERSION}); "
            "upgrade nnrt-backend-npu-emu or recompile the model")
    if version < 1:
        raise OfflineModelError(f"offline model format version {version} is not supported")
    if flags != 0:
        raise OfflineModelError(f"offline model has unknown flags {flags:#x}")
    end = _FIXED.size + hlen + wlen
    if end > len(blob):
        raise OfflineModelError(f"offline model is truncated ({len(blob)} bytes, expected {end})")
    if end < len(blob):
        raise OfflineModelError(f"offline model has {len(blob) - end} unexpected trailing bytes")
    body = blob[_FIXED.size:end]
    if _digest(body, version=version) != digest:
        raise OfflineModelError("offline model checksum mismatch: the file is corrupted")
    try:
        head = json.loads(bytes(body[:hlen]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OfflineModelError(f"offline model header is malformed: {e}") from None
    if not isinstance(head, dict) or not isinstance(head.get("meta"), dict) or not isinstance(head.get("program"), dict):
        raise OfflineModelError("offline model header is malformed")
    try:
        program = Program.from_dict(head["program"])
    except CompileError as e:
        raise OfflineModelError(str(e)) from None
    weights = body[hlen:]
    if len(weights) != program.const_size:
        raise OfflineModelError(f"offline model weights hold {len(weights)} bytes, program expects "
                                f"{program.const_size}")
    return head["meta"], program, weights
