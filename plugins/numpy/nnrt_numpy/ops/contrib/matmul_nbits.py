"""MatMulNBits (com.microsoft): ``Y = A @ dequant(B)^T + bias`` where B holds
N x K weights quantized block-wise along K with ``bits`` bits per value,
bit-packed little-endian inside each block blob (for 4 bits: low nibble
first).  Zero points are packed the same way (uint8) or given unpacked in A's
type; their default is ``2**(bits-1)``."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import MS


def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Unpack the last axis of a uint8 array into ``count`` unsigned ``bits``-bit values."""
    if bits == 8:
        return packed[..., :count].astype(np.int32)
    if 8 % bits == 0:  # 2 or 4 bits: whole values per byte, lowest bits first
        shifts = np.arange(0, 8, bits, dtype=np.uint8)
        vals = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
        return vals.reshape(packed.shape[:-1] + (-1,))[..., :count].astype(np.int32)
    flat = np.unpackbits(packed, axis=-1, bitorder="little")
    n = flat.shape[-1] // bits
    vals = flat[..., : n * bits].reshape(packed.shape[:-1] + (n, bits))
    weights = (1 << np.arange(bits, dtype=np.int32))
    return (vals.astype(np.int32) @ weights)[..., :count]


@register
class MatMulNBits(Kernel):
    op_type = "MatMulNBits"
    domain = MS
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        for req in ("K", "N", "block_size"):
            if node.attr(req) is None:
                raise self.fail(f"the {req!r} attribute is required")
        self.k = int(node.attr("K"))
        self.n = int(node.attr("N"))
        self.block = int(node.attr("block_size"))
        self.bits = int(node.attr("bits", 4))
        if not 2 <= self.bits <= 8:
            raise self.fail(f"bits must be in [2, 8], got {self.bits}")
        if self.block < 16 or self.block & (self.block - 1):
            raise self.fail(f"block_size must be a power of two >= 16, got {self.block}")
        if int(node.attr("weight_prepacked", 0)):
            raise self.fail("prepacked weights are not supported")
        if node.present(4):
            raise self.fail("g_idx (deprecated) is not supported")
        self._w: np.ndarray | None = None
        consts = [node.const(1), node.const(2)]
        if node.present(3):
            consts.append(node.const(3))
        if all(c is not None for c in consts):  # constant weights: dequantize once
            zp = node.const(3) if node.present(3) else None
            self._w = self._dequant(consts[0], consts[1], zp, node.dtype(0) or np.float32)

    @classmethod
    def _check(cls, node: NodeInfo) -> str | None:
        if int(node.attr("weight_prepacked", 0) or 0):
            return "MatMulNBits with EP-prepacked weights is not supported"
        if node.present(4):
            return "MatMulNBits g_idx input is not supported"
        return None

    def _dequant(self, b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None, dt: np.dtype) -> np.ndarray:
        nb = -(-self.k // self.block)
        blob = self.block * self.bits // 8
        b = np.asarray(b)
        if b.dtype != np.uint8 or b.size != self.n * nb * blob:
            raise self.fail(f"B must be uint8 of shape ({self.n}, {nb}, {blob}), got {b.dtype} {b.shape}")
        q = unpack_bits(b.reshape(self.n, nb, blob), self.bits, self.block)  # (N, nb, block)
        scales = np.asarray(scales)
        if scales.size != self.n * nb:
            raise self.fail(f"scales must have {self.n * nb} entries, got shape {scales.shape}")
        s = scales.reshape(self.n, nb, 1).astype(np.float32)
        if zp is None:
            z = np.float32(1 << (self.bits - 1))
        else:
            zp = np.asarray(zp)
            if zp.dtype == np.uint8:
                per_row = -(-nb * self.bits // 8)
                if zp.size != self.n * per_row:
                    raise self.fail(f"packed zero_points must have shape ({self.n}, {per_row}), got {zp.shape}")
                z = unpack_bits(zp.reshape(self.n, per_row), self.bits, nb).reshape(self.n, nb, 1).astype(np.float32)
            else:
                if zp.size != self.n * nb:
                    raise self.fail(f"zero_points must have shape ({self.n}, {nb}), got {zp.shape}")
                z = zp.reshape(self.n, nb, 1).astype(np.float32)
        w = ((q.astype(np.float32) - z) * s).reshape(self.n, nb * self.block)[:, : self.k]
        return w.astype(dt if np.dtype(dt) == np.float64 else np.float32)

    def __call__(self, a, b, scales, zero_points=None, g_idx=None, bias=None) -> Sequence[Any]:
        a = np.asarray(a)
        if a.shape[-1] != self.k:
            raise self.fail(f"A's last dimension {a.shape[-1]} != K={self.k}")
        w = self._w if self._w is not None else self._dequant(b, scales, zero_points, a.dtype)
        y = a.astype(w.dtype, copy=False) @ w.T
        if bias is not None:
            bias = np.asarray(bias)
            if bias.shape != (self.n,):
                raise self.fail(f"bias must have shape ({self.n},), got {bias.shape}")
            y = y + bias.astype(w.dtype)
        return (y.astype(a.dtype, copy=False),)
