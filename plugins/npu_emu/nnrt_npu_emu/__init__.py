"""nnrt backend plugin: an emulated mobile NPU.

Emulates what a chip accepts (an NNRt-like op subset, static shapes, rank
limits per instruction, with reshapes free and transposes folded to fewer
axes), its numerics (fp16 storage with fp32 accumulation; int8 with int32
accumulation and requantization from Q/DQ models), its memory (a device
arena with compile-time planned offsets), its compile step (versioned,
checksummed offline models) and its timing (a per-op cycle model).

The built-in chips compute floats in fp16 (``emu-npu-f16``) or only int8
(``emu-npu-i8``).  Under ``precision="fp32"`` (the default) they decline every
node they would not compute bit-exactly as fp32 would, keeping only non-float
work (comparisons, boolean logic, integer/boolean data movement, exact casts:
``lowering.capability.exact_in_fp32``); ``precision="fp16"``, ``"int8"`` or
``"auto"`` asks for the chip's own precision (docs/scheduling.md).
"""
from __future__ import annotations

from nnrt_npu_emu.version import __version__

__all__ = ["__version__", "save_offline", "load_offline"]


def __getattr__(name: str):
    if name in ("save_offline", "load_offline"):
        from nnrt_npu_emu import offline

        return getattr(offline, name)
    raise AttributeError(name)
