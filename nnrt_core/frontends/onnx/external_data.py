"""External tensor data: folder checks, size checks, and ``mmap`` views.

:func:`load_external_data` maps external data files instead of reading them:
a tensor of ``MMAP_MIN_BYTES`` or more that numpy can view in place (any
fixed-width type that is not bit-packed, at an offset aligned to its item
size) becomes a read-only array over one ``mmap`` of its file (one map per
file and load), so its bytes are never copied.  Other external tensors are
read into the proto.
"""
from __future__ import annotations

import logging
import mmap
import os

import numpy as np
import onnx

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx.protos import all_tensors, copy_model, declared_bytes, first_line, mappable_dtype

__all__ = ["MAPPED_KEY", "MMAP_MIN_BYTES", "for_checker", "is_mapped", "load_external_data", "mapped_key"]

log = logging.getLogger("nnrt.onnx")

#: external tensors smaller than this are read into the proto rather than
#: mapped: shape inference needs the values of small ones (Reshape targets,
#: Slice bounds) and cannot read external data
MMAP_MIN_BYTES = 4096

#: external_data key that marks a mapped tensor (its value: the key in ``mapped``)
MAPPED_KEY = "nnrt.mapped"


def mapped_key(t: onnx.TensorProto) -> str | None:
    """The key in ``mapped`` of a tensor :func:`load_external_data` mapped."""
    return next((e.value for e in t.external_data if e.key == MAPPED_KEY), None)


def is_mapped(t: onnx.TensorProto) -> bool:
    """True for an external tensor whose data was mapped (not read)."""
    return t.data_location == onnx.TensorProto.EXTERNAL and any(e.key == MAPPED_KEY for e in t.external_data)


def load_external_data(proto: onnx.ModelProto, base_dir: str | None,
                       mapped: dict[str, np.ndarray] | None = None) -> None:
    """Resolve external tensor data, refusing paths outside ``base_dir``.

    Without ``mapped`` every external tensor's bytes are read into its
    ``raw_data``.  With it (a dict to fill), a tensor numpy can view in place
    (:func:`~nnrt_core.frontends.onnx.protos.mappable_dtype`, at least
    ``MMAP_MIN_BYTES``, its offset aligned to its item size) keeps
    ``data_location: EXTERNAL`` with one more ``external_data`` entry,
    ``nnrt.mapped``, naming its entry in ``mapped``: a read-only ``uint8``
    array over a ``mmap`` of the file (mode read, one map per file), which
    ``tensor_to_array`` views with the tensor's type and shape.  The other
    tensors are read into ``raw_data`` as before.
    """
    maps: dict[str, mmap.mmap | None] = {}  # real path -> its map (None: empty or unmappable file)
    used: set[str] = set()  # paths with mapped tensors: their maps must stay open
    root = os.path.realpath(base_dir) if base_dir is not None else ""
    try:
        for t in all_tensors(proto):
            if t.data_location != onnx.TensorProto.EXTERNAL:
                continue
            info = {e.key: e.value for e in t.external_data}
            location, path = _data_file(t, info, base_dir, root)
            if mapped is not None and path not in maps:
                maps[path] = _map_file(path)
            mm = maps.get(path)
            size = len(mm) if mm is not None else os.path.getsize(path)
            offset, length = _data_range(t, info, location, size)
            del t.external_data[:]
            dtype = mappable_dtype(t) if mm is not None and length >= MMAP_MIN_BYTES else None
            if mapped is not None and dtype is not None and offset % dtype.itemsize == 0:
                key = str(len(mapped))
                mapped[key] = np.frombuffer(mm, dtype=np.uint8, count=length, offset=offset)
                used.add(path)
                for k, v in (("location", location), ("offset", str(offset)), ("length", str(length)),
                             (MAPPED_KEY, key)):
                    t.external_data.add(key=k, value=v)
                continue
            _read_into(t, mm, path, offset, length)
    finally:
        for path, mm in maps.items():
            if mm is not None and path not in used:
                mm.close()


def _data_file(t: onnx.TensorProto, info: dict[str, str], base_dir: str | None, root: str) -> tuple[str, str]:
    """(location, real path) of ``t``'s data file, checked to lie inside the model's folder."""
    where = f"tensor {t.name!r}"
    if base_dir is None:
        raise ModelLoadError(
            f"{where} stores its data in an external file, which needs the model to be loaded "
            "from a path (its folder locates the data)"
        )
    location = info.get("location", "")
    if not location or os.path.isabs(location):
        raise ModelLoadError(f"{where}: external data location {location!r} must be a relative path")
    if "\x00" in location:
        raise ModelLoadError(f"{where}: external data location {location!r} holds a NUL byte; expected a file name")
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        raise ModelLoadError(
            f"{where}: external data path {location!r} escapes the model folder {root!r}; refused"
        )
    if not os.path.isfile(path):
        raise ModelLoadError(f"{where}: external data file {location!r} not found in {root!r}")
    return location, path


def _data_range(t: onnx.TensorProto, info: dict[str, str], location: str, size: int) -> tuple[int, int]:
    """(offset, length) of ``t``'s data in a file of ``size`` bytes, checked
    against the file and against the bytes ``t`` declares."""
    where = f"tensor {t.name!r}"
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else size - offset
    except ValueError as e:
        raise ModelLoadError(f"{where}: bad external data offset/length: {e}") from e
    expected = declared_bytes(t)  # refuses absurd sizes before anything is read
    if offset < 0 or length < 0 or offset + length > size:
        raise ModelLoadError(
            f"{where}: external data range [{offset}, {offset + length}) is outside "
            f"{location!r} ({size} bytes)"
        )
    if expected is not None and length != expected:
        raise ModelLoadError(
            f"{where}: declares {expected} bytes of data but external data holds {length}"
        )
    return offset, length


def _read_into(t: onnx.TensorProto, mm: mmap.mmap | None, path: str, offset: int, length: int) -> None:
    """Copy ``t``'s external bytes into its ``raw_data``."""
    if mm is not None:
        t.raw_data = mm[offset:offset + length]
    else:
        with open(path, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
    t.data_location = onnx.TensorProto.DEFAULT


def _map_file(path: str) -> mmap.mmap | None:
    """A read-only map of ``path``; ``None`` for an empty file or one that
    cannot be mapped (its tensors are then read)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        log.info("external data file %r not mapped (%s); reading it", path, first_line(e))
        return None


def for_checker(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``proto`` the ONNX checker accepts: it would look for mapped
    tensors' files relative to the working directory, so they become empty
    tensors of their type (the checker does not relate initializer shapes to
    nodes).  Cheap: mapped data is not in the proto."""
    c = copy_model(proto)
    for t in all_tensors(c):
        if is_mapped(t):
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
            del t.dims[:]
            t.dims.append(0)
    return c
