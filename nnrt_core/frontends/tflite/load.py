"""TFLite file / bytes -> nnrt IR ``Model``."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Mapping, Sequence

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.tflite.convert import PluginOps, convert
from nnrt_core.frontends.tflite.schema import MAX_TENSOR_BYTES, FlatModel
from nnrt_core.ir import Model

__all__ = ["load_tflite", "read_flat_model"]

#: the largest .tflite file read (the flatbuffer format itself stops at 2 GiB plus appended buffers)
MAX_FILE_BYTES = 4 * MAX_TENSOR_BYTES


def read_flat_model(source: Any) -> FlatModel:
    """Parse and check a TFLite model from a path or bytes (the bytes are kept, not copied)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return FlatModel(bytes(source) if not isinstance(source, bytes) else source, "<bytes>")
    if isinstance(source, (str, os.PathLike)):
        name = str(Path(source))
        try:  # one stat, not Path.is_file() then Path.stat() (each with pathlib's overhead)
            st = os.stat(source)
        except (OSError, ValueError):
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise ModelLoadError(f"model file {name!r} does not exist or is not a file")
        if st.st_size > MAX_FILE_BYTES:
            raise ModelLoadError(f"model file {name!r} is {st.st_size} bytes, over the limit of {MAX_FILE_BYTES}")
        # read, not mapped: a file truncated under a mapping would fault the process (docs/security.md)
        try:
            with open(source, "rb") as f:
                data = f.read()
                real = _opened_path(f.fileno(), st)
        except OSError as e:
            raise ModelLoadError(f"cannot read model file {name!r}: {e}") from e
        flat = FlatModel(data, name)
        flat.real_path = real
        return flat
    raise ModelLoadError(f"cannot load a TFLite model from {type(source).__name__}; expected a path or bytes")


_readlink = os.readlink


def _opened_path(fd: int, st: os.stat_result) -> str | None:
    """The resolved path of the open file ``fd`` (stat ``st``) from ``/proc/self/fd`` (Linux
    writes it without symlinks): one ``readlink`` (~8 µs) where ``os.path.realpath`` stats
    every component of the path (~40 µs for a 7-level path).  ``None`` when there is no
    such link, or it does not name that same file (a deleted file, another mount
    namespace): then the caller resolves the path itself."""
    try:
        link = _readlink(f"/proc/self/fd/{fd}")
        if not os.path.isabs(link):
            return None
        seen = os.stat(link)
    except (OSError, ValueError):
        return None
    return link if (seen.st_dev, seen.st_ino) == (st.st_dev, st.st_ino) else None


def load_tflite(source: Any, plugin_ops: PluginOps | None = None,
                input_shapes: Mapping[str, Sequence[int]] | None = None) -> Model:
    """The IR model of a ``.tflite`` path or bytes (the main subgraph; see docs/tflite.md).
    ``plugin_ops``: plugins' custom-operator mappers (``Registry.tflite_custom_ops``);
    ``input_shapes``: shapes for inputs with free dimensions (``shape_signature`` -1)."""
    flat = read_flat_model(source)
    model = convert(flat, plugin_ops, input_shapes)
    if isinstance(source, (str, os.PathLike)):  # Path.resolve() would stat the result again
        model.base_dir = os.path.dirname(flat.real_path or os.path.realpath(source))
    return model
