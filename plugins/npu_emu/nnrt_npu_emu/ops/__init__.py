"""The op subset of the emulated NPU.

Each op family module registers :class:`OpDef` entries (capability check and
lowering to device kernels) and kernels (``fn(ins, outs, attrs)`` writing into
the pre-planned output views).  Kernels are vectorized numpy; float kernels
read fp16/fp32 storage, accumulate in fp32 and round on the store.
"""
from __future__ import annotations

from nnrt_npu_emu.ops.common import (KERNELS, OPS, EXACT, STORE_KERNELS, LowerContext, OpDef, Step, Unsupported,
                                     attr_ints, kernel, op, store, store_kernel)
from nnrt_npu_emu.ops import elementwise, int8, logical, nn, quant, resize, tensor  # noqa: F401  (registers the ops)

__all__ = ["OpDef", "Step", "LowerContext", "OPS", "KERNELS", "EXACT", "STORE_KERNELS", "op", "kernel",
           "store_kernel", "Unsupported", "attr_ints", "store"]
