"""Offline models on disk: ``save_offline`` / ``load_offline`` (for ``nnrt compile``)."""
from __future__ import annotations

import os
from pathlib import Path

from nnrt_core.plugin_api import CompileOptions, CompiledPartition
from nnrt_core.errors import CompileError
from nnrt_core.plugin_api import write_atomic

__all__ = ["save_offline", "load_offline", "SUFFIX"]

SUFFIX = ".npumodel"


def save_offline(compiled: CompiledPartition, path: str | os.PathLike) -> Path:
    """Write ``compiled`` (an npu_emu partition) as an offline model file."""
    blob = compiled.serialize()
    if blob is None:
        raise CompileError(f"partition {compiled.name!r} cannot be saved as an offline model")
    return write_atomic(path, blob)


def load_offline(path: str | os.PathLike, options: CompileOptions | None = None, backend=None):
    """Load an offline model file onto a matching chip (no source model needed)."""
    p = Path(path)
    if not p.is_file():
        raise CompileError(f"offline model file {str(p)!r} does not exist")
    if backend is None:
        backend = _backend()
    return backend.load_compiled(p.read_bytes(), options or CompileOptions())


def _backend():
    try:
        from nnrt_core.plugin_api import default_registry

        rec = default_registry().backends.get("npu_emu")
        if rec is not None and rec.backend is not None:
            return rec.backend
    except Exception:  # pragma: no cover - registry problems: use a private instance
        pass
    from nnrt_npu_emu.backend import NpuEmuBackend

    return NpuEmuBackend()
