"""External tensor data: folder checks, size checks, and reads into arrays.

:func:`load_external_data` reads external data files once: a tensor of
``MMAP_MIN_BYTES`` or more that numpy can view as it is (any fixed-width type
that is not bit-packed) is read straight into an array of its own, never
through the protobuf; other external tensors are read into the proto.  The
loaded model owns its weights: the files are not mapped (a mapped file that
is truncated later kills the process with SIGBUS at the next access, and one
rewritten in place changes the weights under a running model), and are
closed when the load returns.
"""
from __future__ import annotations

import io
import os
import stat
from typing import Any, Mapping

import numpy as np

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.frontends.onnx.protos import all_tensors, copy_model, declared_bytes, mappable_dtype

__all__ = ["MAPPED_KEY", "MMAP_MIN_BYTES", "for_checker", "is_mapped", "load_external_data", "mapped_key"]

#: external tensors smaller than this are read into the proto rather than
#: into arrays of their own ("mapped" below: kept out of the proto): shape
#: inference needs the values of small ones (Reshape targets, Slice bounds)
#: and cannot read external data
MMAP_MIN_BYTES = 4096

#: external_data key that marks a tensor whose data was read into an array
#: of the ``mapped`` dict, outside the proto (its value: the key there)
MAPPED_KEY = "nnrt.mapped"


def mapped_key(t: P.TensorProto) -> str | None:
    """The key in ``mapped`` of a tensor :func:`load_external_data` read into an array."""
    return next((e.value for e in t.external_data if e.key == MAPPED_KEY), None)


def is_mapped(t: P.TensorProto) -> bool:
    """True for an external tensor whose data is an array in ``mapped`` (not in the proto)."""
    return t.data_location == P.TensorProto.EXTERNAL and any(e.key == MAPPED_KEY for e in t.external_data)


def load_external_data(proto: P.ModelProto, base_dir: str | None,
                       mapped: dict[str, np.ndarray] | None = None,
                       regions: Mapping[str, Any] | None = None) -> int:
    """Resolve external tensor data, refusing paths outside ``base_dir``;
    returns how many tensors had external data (0: ``proto`` is unchanged).

    ``regions``: in-memory external data, location -> read-only bytes-like
    (a compiled partition's weights region): a tensor whose ``location`` is
    one of them is viewed in place (into ``mapped``, no copy) instead of read
    from a file; offsets and lengths are checked the same way.

    Without ``mapped`` every external tensor's bytes are read into its
    ``raw_data``.  With it (a dict to fill), a tensor numpy can view as it is
    (:func:`~nnrt_core.frontends.onnx.protos.mappable_dtype`, at least
    ``MMAP_MIN_BYTES``) is read straight into a new ``uint8`` array (one
    copy, never through the protobuf) and keeps ``data_location: EXTERNAL``
    with one more ``external_data`` entry, ``nnrt.mapped``, naming that
    array's key in ``mapped``; ``tensor_to_array`` views it with the
    tensor's type and shape.  The other tensors are read into ``raw_data``.
    Nothing stays mapped or open: a data file changed or truncated after the
    load does not change (or crash) the loaded model.
    """
    files: dict[str, io.FileIO] = {}  # real path -> the open file, one per file and load
    root = os.path.realpath(base_dir) if base_dir is not None else ""
    resolved = 0
    try:
        for t in all_tensors(proto):
            if t.data_location != P.TensorProto.EXTERNAL:
                continue
            resolved += 1
            info = {e.key: e.value for e in t.external_data}
            if regions is not None and info.get("location") in regions:
                _from_region(t, info, regions[info["location"]], mapped)
                continue
            location, path = _data_file(t, info, base_dir, root)
            if path not in files:
                files[path] = _open_regular(path, location, t)
            f = files[path]
            offset, length = _data_range(t, info, location, os.fstat(f.fileno()).st_size)
            del t.external_data[:]
            dtype = mappable_dtype(t) if length >= MMAP_MIN_BYTES else None
            if mapped is not None and dtype is not None:
                key = str(len(mapped))
                mapped[key] = buf = np.empty(length, np.uint8)
                _read_exact(f, offset, memoryview(buf), location)
                buf.flags.writeable = False  # as constants are everywhere else
                for k, v in (("location", location), ("offset", str(offset)), ("length", str(length)),
                             (MAPPED_KEY, key)):
                    t.external_data.add(key=k, value=v)
                continue
            buf = bytearray(length)
            _read_exact(f, offset, memoryview(buf), location)
            t.raw_data = bytes(buf)
            t.data_location = P.TensorProto.DEFAULT
    finally:
        for f in files.values():
            f.close()
    return resolved


def _from_region(t: P.TensorProto, info: dict[str, str], region: Any,
                 mapped: dict[str, np.ndarray] | None) -> None:
    """``t``'s data from an in-memory region: a read-only view in ``mapped``
    (a writable region is copied first), or copied into the proto."""
    view = memoryview(region).cast("B")
    if not view.readonly:
        view = memoryview(view.tobytes())
    location = info["location"]
    offset, length = _data_range(t, info, location, len(view))
    del t.external_data[:]
    if mapped is not None and length >= MMAP_MIN_BYTES and mappable_dtype(t) is not None:
        key = str(len(mapped))
        mapped[key] = np.frombuffer(view, np.uint8, length, offset)  # read-only, like the region
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length)), (MAPPED_KEY, key)):
            t.external_data.add(key=k, value=v)
        return
    t.raw_data = bytes(view[offset:offset + length])
    t.data_location = P.TensorProto.DEFAULT


def _data_file(t: P.TensorProto, info: dict[str, str], base_dir: str | None, root: str) -> tuple[str, str]:
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
    if not os.path.exists(path):
        raise ModelLoadError(f"{where}: external data file {location!r} not found in {root!r}")
    if not os.path.isfile(path):
        raise ModelLoadError(f"{where}: external data {location!r} in {root!r} is not a regular file")
    return location, path


def _data_range(t: P.TensorProto, info: dict[str, str], location: str, size: int) -> tuple[int, int]:
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


def _open_regular(path: str, location: str, t: P.TensorProto) -> io.FileIO:
    """``path`` opened for reading; a FIFO, device or directory swapped in
    after the folder check is refused (without blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ModelLoadError(f"tensor {t.name!r}: cannot open external data file {location!r}: {e}") from e
    f = io.FileIO(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise ModelLoadError(f"tensor {t.name!r}: external data {location!r} is not a regular file")
    return f


def _read_exact(f: io.FileIO, offset: int, out: memoryview, location: str) -> None:
    """Fill ``out`` from ``f`` at ``offset``; a file that shrank meanwhile is an error."""
    f.seek(offset)
    done = 0
    while done < len(out):
        n = f.readinto(out[done:])
        if not n:
            raise ModelLoadError(f"external data file {location!r} ended at byte {offset + done} while "
                                 f"loading (it was truncated or rewritten during the load)")
        done += n


def for_checker(proto: P.ModelProto) -> P.ModelProto:
    """A copy of ``proto`` the ONNX checker accepts: it would look for the
    files of tensors read into ``mapped`` relative to the working directory, so they become empty
    tensors of their type (the checker does not relate initializer shapes to
    nodes).  Cheap: that data is not in the proto."""
    c = copy_model(proto)
    for t in all_tensors(c):
        if is_mapped(t):
            del t.external_data[:]
            t.data_location = P.TensorProto.DEFAULT
            del t.dims[:]
            t.dims.append(0)
    return c
