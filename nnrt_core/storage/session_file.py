"""Compiled sessions as files: offline models and the model cache.

A compiled session (its placement and every partition's compiled form) is
stored in our own format; no pickle, nothing is evaluated::

    magic        8s   b"NNRTSES\\0"
    version      u32  FORMAT_VERSION
    flags        u32  0
    header_len   u64
    header_sha   32s  sha256 of the header
    header       JSON (utf-8): session facts and one entry per payload
    payload      the entries' bytes back to back; each entry has its own
                 offset, length and checksum in the header

Format 2 checks entries with XXH3-128 (``"xxh3_128"``), format 1 with sha256
(``"sha256"``); both are read (see :mod:`nnrt_core.storage.checksum`).

Partition entries hold ``CompiledPartition.serialize()`` bytes, which the
backend named in the entry turns back into a partition with
``Backend.load_compiled``; constant graph outputs are stored as raw arrays.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnrt_core.storage import checksum
from nnrt_core.errors import SessionFileError
from nnrt_core.ir import DataType, OptionalType, SequenceType, TensorType, ValueType

__all__ = ["MAGIC", "FORMAT_VERSION", "NewerFormatError", "PartitionRecord", "SessionImage", "encode", "decode",
           "looks_like_session_file", "read_session_file", "type_to_json", "type_from_json"]

MAGIC = b"NNRTSES\x00"
FORMAT_VERSION = 2
_FIXED = struct.Struct("<8sIIQ32s")
#: the checksum names an entry may carry, by the format versions that write them
_ENTRY_CHECKSUMS = ("xxh3_128", "sha256")


class NewerFormatError(SessionFileError):
    """The file was written by a newer nnrt in a format this one cannot read."""


#: largest header we read (the header holds names and reports, never weights)
MAX_HEADER_BYTES = 256 << 20


@dataclass
class PartitionRecord:
    """One compiled partition as stored."""

    index: int
    backend: str
    backend_version: str
    name: str
    nodes: list[tuple[str, str]]  #: (node name, qualified op type)
    inputs: list[str]
    outputs: list[str]
    blob: bytes | memoryview


@dataclass
class SessionImage:
    """What a session needs to run without its source model."""

    config: dict[str, Any]
    inputs: list[tuple[str, ValueType | None]]
    outputs: list[tuple[str, ValueType | None]]
    partitions: list[PartitionRecord]
    placement: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------ types
def type_to_json(t: ValueType | None) -> Any:
    if t is None:
        return None
    if isinstance(t, TensorType):
        shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None for d in t.shape]
        return {"kind": "tensor", "dtype": int(t.dtype), "shape": shape}
    if isinstance(t, SequenceType):
        return {"kind": "sequence", "elem": type_to_json(t.elem)}
    if isinstance(t, OptionalType):
        return {"kind": "optional", "elem": type_to_json(t.elem)}
    raise SessionFileError(f"cannot store value type {t!r}")


def type_from_json(d: Any) -> ValueType | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise SessionFileError(f"malformed value type {d!r}")
    kind = d.get("kind")
    if kind == "tensor":
        try:
            dtype = DataType(int(d["dtype"]))
        except (KeyError, ValueError, TypeError):
            raise SessionFileError(f"malformed tensor type {d!r}") from None
        shape = d.get("shape")
        if shape is not None:
            if not isinstance(shape, list) or not all(x is None or isinstance(x, (int, str)) for x in shape):
                raise SessionFileError(f"malformed tensor shape {shape!r}")
            shape = tuple(shape)
        return TensorType(dtype, shape)
    if kind == "sequence":
        return SequenceType(type_from_json(d.get("elem")))
    if kind == "optional":
        return OptionalType(type_from_json(d.get("elem")))
    raise SessionFileError(f"unknown value type kind {kind!r}")


# ----------------------------------------------------------------- encode
def encode(image: SessionImage) -> bytes:
    """The file bytes of ``image``."""
    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    offset = 0

    def add(data: bytes) -> int:
        nonlocal offset
        entries.append({"offset": offset, "length": len(data),
                        checksum.DEFAULT_ALGORITHM: checksum.hexdigest(data)})
        chunks.append(data)
        offset += len(data)
        return len(entries) - 1

    parts = []
    for p in image.partitions:
        parts.append({"index": p.index, "backend": p.backend, "backend_version": p.backend_version,
                      "name": p.name, "nodes": [list(n) for n in p.nodes], "inputs": p.inputs,
                      "outputs": p.outputs, "entry": add(p.blob)})
    consts = []
    for name, arr in image.constants.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype.kind in "OUSV":
            raise SessionFileError(f"constant output {name!r} has dtype {arr.dtype}, which a session file "
                                   "cannot store")
        consts.append({"name": name, "dtype": arr.dtype.str, "shape": list(arr.shape), "entry": add(arr.tobytes())})
    header = {
        "config": image.config,
        "inputs": [[n, type_to_json(t)] for n, t in image.inputs],
        "outputs": [[n, type_to_json(t)] for n, t in image.outputs],
        "partitions": parts, "constants": consts,
        "placement": image.placement, "events": image.events, "meta": image.meta,
        "entries": entries,
    }
    head = json.dumps(header, separators=(",", ":"), default=str).encode("utf-8")
    fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, 0, len(head), hashlib.sha256(head).digest())
    return b"".join([fixed, head, *chunks])


# ----------------------------------------------------------------- decode
def looks_like_session_file(model: Any) -> bool:
    """True when ``model`` is bytes or a path of a file starting with our magic."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model[:8]) == MAGIC
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f:
                return f.read(8) == MAGIC
        except OSError:
            return False
    return False


def read_session_file(path: str | os.PathLike) -> SessionImage:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SessionFileError(f"cannot read session file {str(p)!r}: {e}") from e
    return decode(data, what=f"session file {str(p)!r}")


def decode(data: bytes, *, what: str = "session file") -> SessionImage:
    """Validate ``data`` and return its image; :class:`SessionFileError` says
    what is wrong (bad magic, newer format, truncation, checksum...)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    if len(data) < _FIXED.size:
        if data[:8] != MAGIC[:len(data[:8])] or not data:
            raise SessionFileError(f"{what} is not an nnrt session file (bad magic)")
        raise SessionFileError(f"{what} is truncated ({len(data)} bytes, the fixed header needs {_FIXED.size})")
    magic, version, flags, hlen, hsha = _FIXED.unpack_from(data)
    if magic != MAGIC:
        raise SessionFileError(f"{what} is not an nnrt session file (bad magic)")
    if version > FORMAT_VERSION:
        raise NewerFormatError(f"{what} has format version {version}, newer than this nnrt reads "
                               f"({FORMAT_VERSION}); upgrade nnrt or recompile the model")
    if version < 1 or flags != 0:
        raise SessionFileError(f"{what} has unsupported format version {version} / flags {flags:#x}")
    if hlen > MAX_HEADER_BYTES or _FIXED.size + hlen > len(data):
        raise SessionFileError(f"{what} is truncated or corrupted (header of {hlen} bytes, file of {len(data)})")
    head_bytes = data[_FIXED.size:_FIXED.size + hlen]
    if hashlib.sha256(head_bytes).digest() != hsha:
        raise SessionFileError(f"{what}: header checksum mismatch (the file is corrupted)")
    try:
        head = json.loads(head_bytes.decode("utf-8"))
        payload = memoryview(data)[_FIXED.size + hlen:]
        entries = head["entries"]
        total = sum(int(e["length"]) for e in entries)
        if total != len(payload):
            raise SessionFileError(f"{what} is truncated or has trailing bytes (payload {len(payload)} bytes, "
                                   f"entries need {total})")

        def entry(i: int) -> bytes:
            e = entries[int(i)]
            off, n = int(e["offset"]), int(e["length"])
            if off < 0 or n < 0 or off + n > len(payload):
                raise SessionFileError(f"{what}: entry {i} lies outside the file")
            chunk = payload[off:off + n]  # a view: partition blobs can be large
            algo = next((a for a in _ENTRY_CHECKSUMS if a in e), None)
            if algo is None:
                raise SessionFileError(f"{what}: entry {i} has no checksum")
            if checksum.hexdigest(chunk, algorithm=algo) != e[algo]:
                raise SessionFileError(f"{what}: entry {i} checksum mismatch (the file is corrupted)")
            return chunk

        parts = [PartitionRecord(int(p["index"]), str(p["backend"]), str(p["backend_version"]), str(p["name"]),
                                 [(str(a), str(b)) for a, b in p["nodes"]], [str(x) for x in p["inputs"]],
                                 [str(x) for x in p["outputs"]], entry(p["entry"]))
                 for p in head["partitions"]]
        consts = {}
        for c in head["constants"]:
            dt = np.dtype(str(c["dtype"]))
            if dt.kind in "OUSV":
                raise SessionFileError(f"{what}: constant {c['name']!r} has a dtype we never store ({dt})")
            shape = tuple(int(x) for x in c["shape"])
            raw = bytes(entry(c["entry"]))
            if len(raw) != dt.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise SessionFileError(f"{what}: constant {c['name']!r} holds {len(raw)} bytes, "
                                       f"shape {shape} of {dt} needs another size")
            consts[str(c["name"])] = np.frombuffer(raw, dt).reshape(shape).copy()
        return SessionImage(
            config=dict(head["config"]),
            inputs=[(str(n), type_from_json(t)) for n, t in head["inputs"]],
            outputs=[(str(n), type_from_json(t)) for n, t in head["outputs"]],
            partitions=parts, placement=list(head.get("placement", [])), events=list(head.get("events", [])),
            constants=consts, meta=dict(head.get("meta", {})))
    except SessionFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError, AttributeError) as e:
        raise SessionFileError(f"{what} has a malformed header: {type(e).__name__}: {e}") from None
