"""Compiled sessions as files: offline models and the model cache.

A compiled session (its placement and every partition's compiled form) is
stored in our own format; no pickle, nothing is evaluated::

    magic        8s   b"NNRTSES\\0"
    version      u32  FORMAT_VERSION
    flags        u32  0
    header_len   u64
    header_sum   32s  checksum of the header (see header_digest)
    header       JSON (utf-8): session facts and one entry per payload
    payload      the entries' bytes back to back; each entry has its own
                 offset, length and checksum in the header

Format 2 checks entries with XXH3-128 (``"xxh3_128"``), format 1 with sha256
(``"sha256"``); both are read (see :mod:`nnrt_core.storage.checksum`).
Format 3 checks the header with XXH3-128 too (zero-padded to 32 bytes;
formats 1 and 2 carry its sha256), so reading a file needs no OpenSSL.

Partition entries hold ``CompiledPartition.serialize()`` bytes, which the
backend named in the entry turns back into a partition with
``Backend.load_compiled``; constant graph outputs are stored as raw arrays.

Format 3 adds ``fallbacks``: for a partition that computes in fp16/bf16 (its
stores may overflow at run time), the same nodes as an ONNX model (``form:
"onnx"``, the optimized graph's nodes, weights in fp32) and the backup backend
to compile them for (``{"partition", "backend", "backend_version", "form",
"entry"}``); a session loaded from the file loads and compiles it, as any
untrusted model, only after an overflow there (``on_overflow="fallback"``,
:mod:`nnrt_core.compiler.overflow`).  Formats 1 and 2 have none.
"""
from __future__ import annotations

import math
import os
import stat
import struct
from typing import Any

import numpy as np

from nnrt_core.storage import checksum
from nnrt_core.storage.header_check import CHECKSUM_NAMES, check_header
from nnrt_core.errors import SessionFileError
from nnrt_core.ir import DataType, OptionalType, SequenceType, TensorType, ValueType
from nnrt_core.record import Record

__all__ = ["MAGIC", "FORMAT_VERSION", "MAX_FILE_BYTES", "header_digest", "NewerFormatError", "PartitionRecord",
           "FallbackRecord", "FALLBACK_FORMS", "SessionImage",
           "encode", "decode", "looks_like_session_file", "read_bytes", "read_session_file", "type_to_json",
           "type_from_json"]

MAGIC = b"NNRTSES\x00"
FORMAT_VERSION = 3
#: the first format whose header checksum is XXH3-128 (sha256 before)
XXH_HEADER_FORMAT = 3
_FIXED = struct.Struct("<8sIIQ32s")
_ENTRY_CHECKSUMS = CHECKSUM_NAMES


def header_digest(head: bytes, version: int = FORMAT_VERSION) -> bytes:
    """The 32-byte header checksum that format ``version`` stores."""
    if version >= XXH_HEADER_FORMAT:
        return checksum.digest(head, algorithm="xxh3_128").ljust(32, b"\0")
    return checksum.ALGORITHMS["sha256"](head).digest()


class NewerFormatError(SessionFileError):
    """The file was written by a newer nnrt in a format this one cannot read."""


#: largest header we read (the header holds names and reports, never weights)
MAX_HEADER_BYTES = 256 << 20
#: largest session file or cache entry we read; a larger one is refused before reading
MAX_FILE_BYTES = 64 << 30


class PartitionRecord(Record):
    """One compiled partition as stored."""

    __slots__ = ("index", "backend", "backend_version", "name", "nodes", "inputs", "outputs", "blob")
    index: int
    backend: str
    backend_version: str
    name: str
    nodes: list[tuple[str, str]]  #: (node name, qualified op type)
    inputs: list[str]
    outputs: list[str]
    blob: bytes | memoryview

    def __init__(self, index: int, backend: str, backend_version: str, name: str, nodes: list[tuple[str, str]],
                 inputs: list[str], outputs: list[str], blob: bytes | memoryview) -> None:
        self.index, self.backend, self.backend_version, self.name = index, backend, backend_version, name
        self.nodes, self.inputs, self.outputs, self.blob = nodes, inputs, outputs, blob


#: the forms a fallback record's bytes may take
FALLBACK_FORMS = ("onnx",)


class FallbackRecord(Record):
    """The nodes of stored partition ``partition`` as an ONNX model
    (``form="onnx"``), for the backup ``backend`` to compile and run instead
    after an fp16 overflow."""

    __slots__ = ("partition", "backend", "backend_version", "form", "blob")
    partition: int
    backend: str
    backend_version: str
    form: str
    blob: bytes | memoryview

    def __init__(self, partition: int, backend: str, backend_version: str, form: str,
                 blob: bytes | memoryview) -> None:
        self.partition, self.backend, self.backend_version = partition, backend, backend_version
        self.form, self.blob = form, blob


class SessionImage(Record):
    """What a session needs to run without its source model."""

    __slots__ = ("config", "inputs", "outputs", "partitions", "placement", "events", "constants", "meta",
                 "fallbacks")
    config: dict[str, Any]
    inputs: list[tuple[str, ValueType | None]]
    outputs: list[tuple[str, ValueType | None]]
    partitions: list[PartitionRecord]
    placement: list[dict[str, Any]]
    events: list[dict[str, Any]]
    constants: dict[str, np.ndarray]
    meta: dict[str, Any]
    fallbacks: list[FallbackRecord]  #: backup-compiled partitions for an overflow (format 3)

    def __init__(self, config: dict[str, Any], inputs: list[tuple[str, ValueType | None]],
                 outputs: list[tuple[str, ValueType | None]], partitions: list[PartitionRecord],
                 placement: list[dict[str, Any]] | None = None, events: list[dict[str, Any]] | None = None,
                 constants: dict[str, np.ndarray] | None = None, meta: dict[str, Any] | None = None,
                 fallbacks: list[FallbackRecord] | None = None) -> None:
        self.config, self.inputs, self.outputs, self.partitions = config, inputs, outputs, partitions
        self.placement = [] if placement is None else placement
        self.events = [] if events is None else events
        self.constants = {} if constants is None else constants
        self.meta = {} if meta is None else meta
        self.fallbacks = [] if fallbacks is None else fallbacks


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
        code = d.get("dtype")
        try:
            dtype = DataType(code) if type(code) is int else None
        except ValueError:
            dtype = None
        if dtype is None:
            raise SessionFileError(f"malformed tensor type {d!r}: dtype must be an ONNX data type number")
        shape = d.get("shape")
        if shape is not None:
            if not isinstance(shape, list) or not all(x is None or isinstance(x, str) or (type(x) is int and x >= 0)
                                                      for x in shape):
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
    fallbacks = [{"partition": f.partition, "backend": f.backend, "backend_version": f.backend_version,
                  "form": f.form, "entry": add(bytes(f.blob))} for f in image.fallbacks]
    header = {
        "config": image.config,
        "inputs": [[n, type_to_json(t)] for n, t in image.inputs],
        "outputs": [[n, type_to_json(t)] for n, t in image.outputs],
        "partitions": parts, "constants": consts,
        "placement": image.placement, "events": image.events, "meta": image.meta,
        "fallbacks": fallbacks, "entries": entries,
    }
    import json  # ~1 ms: only when a file is written or read

    head = json.dumps(header, separators=(",", ":"), default=str).encode("utf-8")
    fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, 0, len(head), header_digest(head))
    return b"".join([fixed, head, *chunks])


# ----------------------------------------------------------------- decode
def looks_like_session_file(model: Any) -> bool:
    """True when ``model`` is bytes or the path of a regular file starting
    with our magic (FIFOs and devices are not opened for reading)."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model[:8]) == MAGIC
    if isinstance(model, (str, os.PathLike)):
        try:
            fd = os.open(model, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except (OSError, ValueError):
            return False
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 8) == MAGIC
        except OSError:
            return False
        finally:
            os.close(fd)
    return False


def read_bytes(path: str | os.PathLike, what: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, read with a bound: a FIFO, a
    device (a link to ``/dev/zero``), a directory or a file over ``limit``
    (default ``MAX_FILE_BYTES``) is refused with :class:`SessionFileError`
    before anything is read, without blocking."""
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise SessionFileError(f"cannot read {what}: {e}") from e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SessionFileError(f"{what} is not a regular file (a directory, FIFO or device); refused")
        raise SessionFileError(f"{what} has {st.st_size} bytes, more than the {limit} a session file may "
                               "have; refused")
    with os.fdopen(fd, "rb") as f:  # buffered: read(n) loops until n bytes or the end
        try:
            data = f.read(st.st_size + 1)  # one more byte: a file that grew is refused
        except OSError as e:
            raise SessionFileError(f"cannot read {what}: {e}") from e
    if len(data) > st.st_size:
        raise SessionFileError(f"{what} grew while it was read; refused")
    return data


def read_session_file(path: str | os.PathLike) -> SessionImage:
    what = f"session file {str(path)!r}"
    return decode(read_bytes(path, what), what=what)


def decode(data: bytes | memoryview, *, what: str = "session file") -> SessionImage:
    """Validate ``data`` and return its image; :class:`SessionFileError` says
    what is wrong (bad magic, newer format, truncation, checksum...).
    ``bytes`` and read-only views (a file in Ray's object store) are used in
    place, the image's blobs being views of them; a writable buffer is copied
    first, so that nothing can change what was checked."""
    data = _frozen(data)
    if len(data) < _FIXED.size:
        if bytes(data[:8]) != MAGIC[:len(data[:8])] or not data:
            raise SessionFileError(f"{what} is not an nnrt session file (bad magic)")
        raise SessionFileError(f"{what} is truncated ({len(data)} bytes, the fixed header needs {_FIXED.size})")
    magic, version, flags, hlen, hsum = _FIXED.unpack_from(data)
    if magic != MAGIC:
        raise SessionFileError(f"{what} is not an nnrt session file (bad magic)")
    if version > FORMAT_VERSION:
        raise NewerFormatError(f"{what} has format version {version}, newer than this nnrt reads "
                               f"({FORMAT_VERSION}); upgrade nnrt or recompile the model")
    if version < 1 or flags != 0:
        raise SessionFileError(f"{what} has unsupported format version {version} / flags {flags:#x}")
    if hlen > MAX_HEADER_BYTES or _FIXED.size + hlen > len(data):
        raise SessionFileError(f"{what} is truncated or corrupted (header of {hlen} bytes, file of {len(data)})")
    head_bytes = bytes(data[_FIXED.size:_FIXED.size + hlen])
    if header_digest(head_bytes, version) != hsum:
        raise SessionFileError(f"{what}: header checksum mismatch (the file is corrupted)")
    import json

    try:
        head = json.loads(head_bytes.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise SessionFileError(f"{what} has a malformed header: {type(e).__name__}: {e}") from None
    check_header(head, what)  # every field's type, and the references between records
    return _image(head, memoryview(data)[_FIXED.size + hlen:], what)


def _frozen(data: Any) -> bytes | memoryview:
    """``data`` as bytes or a read-only, contiguous byte view (no copy), else a copy."""
    if isinstance(data, bytes):
        return data
    view = memoryview(data)
    if view.readonly and view.c_contiguous:
        return view if view.format == "B" and view.ndim == 1 else view.cast("B")
    return view.tobytes()


def _image(head: dict[str, Any], payload: memoryview, what: str) -> SessionImage:
    """The image of a checked header over its ``payload``."""
    entries = head["entries"]
    total = sum(e["length"] for e in entries)
    if total != len(payload):
        raise SessionFileError(f"{what} is truncated or has trailing bytes (payload {len(payload)} bytes, "
                               f"entries need {total})")

    def entry(i: int) -> memoryview:
        e = entries[i]
        off, n = e["offset"], e["length"]
        if off + n > len(payload):
            raise SessionFileError(f"{what}: entry {i} lies outside the file")
        chunk = payload[off:off + n]  # a view: partition blobs can be large
        algo = next(a for a in _ENTRY_CHECKSUMS if a in e)
        if checksum.hexdigest(chunk, algorithm=algo) != e[algo]:
            raise SessionFileError(f"{what}: entry {i} checksum mismatch (the file is corrupted)")
        return chunk

    parts = [PartitionRecord(p["index"], p["backend"], p["backend_version"], p["name"],
                             [(a, b) for a, b in p["nodes"]], list(p["inputs"]), list(p["outputs"]),
                             entry(p["entry"]))
             for p in head["partitions"]]
    consts = {c["name"]: _constant(c, entry(c["entry"]), f"{what}: constants[{i}]")
              for i, c in enumerate(head["constants"])}
    fallbacks = [FallbackRecord(f["partition"], f["backend"], f["backend_version"], f["form"], entry(f["entry"]))
                 for f in head.get("fallbacks", [])]
    return SessionImage(
        config=dict(head["config"]),
        inputs=[(n, _type(t, f"{what}: inputs[{i}]")) for i, (n, t) in enumerate(head["inputs"])],
        outputs=[(n, _type(t, f"{what}: outputs[{i}]")) for i, (n, t) in enumerate(head["outputs"])],
        partitions=parts, placement=list(head.get("placement", [])), events=list(head.get("events", [])),
        constants=consts, meta=dict(head.get("meta", {})), fallbacks=fallbacks)


def _constant(c: dict[str, Any], raw: memoryview, where: str) -> np.ndarray:
    """A stored constant output, its dtype and size checked."""
    try:
        dt = np.dtype(c["dtype"])
    except TypeError as e:
        raise SessionFileError(f"{where}.dtype: {c['dtype']!r} is not a dtype ({e})") from None
    if dt.kind not in "biufc" or dt.str != c["dtype"]:
        raise SessionFileError(f"{where}.dtype: {c['dtype']!r} is not a dtype we store")
    shape = tuple(c["shape"])
    if len(raw) != dt.itemsize * math.prod(shape):
        raise SessionFileError(f"{where}: holds {len(raw)} bytes, shape {shape} of {dt} needs another size")
    return np.frombuffer(bytes(raw), dt).reshape(shape).copy()


def _type(t: Any, where: str) -> ValueType | None:
    try:
        return type_from_json(t)
    except SessionFileError as e:
        raise SessionFileError(f"{where}[1]: {e}") from None
    except RecursionError:
        raise SessionFileError(f"{where}[1]: value type nested too deeply") from None
