"""Entry point of the emulated NPU backend (group ``nnrt.backends``)."""
from __future__ import annotations

from nnrt_core.plugin_api import hookimpl

__all__ = ["nnrt_backends"]


@hookimpl
def nnrt_backends():
    from nnrt_npu_emu.backend import NpuEmuBackend

    return [NpuEmuBackend]
