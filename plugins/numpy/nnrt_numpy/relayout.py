"""Weight re-layouts done at compile time, at memory speed.

``np.ascontiguousarray(a.T)`` gathers each output row from one column of
``a``: one element per source row.  When a source row's byte length is a
multiple of 1 KiB those elements fall in a few of the L1 cache's sets and the
gather thrashes it: 49 ms for the 6522 x 1024 float32 Gemm weight of BirdNET
here (copying it takes 2 ms).  :func:`transposed` then copies strips of
:data:`STRIP_ROWS` source rows instead (each strip read contiguously, each
output row written a cache line at a time): 10 ms.  Other row lengths of a
large matrix take strips of :data:`WIDE_STRIP_ROWS` rows, as fast as the one
numpy call or faster (float32, best of 9: 2000 x 704 1.46 -> 0.83 ms,
4096 x 1000 9.0 -> 5.3 ms, 1280 x 1001 1.79 -> 0.45 ms, 512 x 2000
0.46 -> 0.39 ms).  The bytes are the same (element copies only).
"""
from __future__ import annotations

import numpy as np

__all__ = ["transposed", "STRIP_ROWS", "WIDE_STRIP_ROWS", "MIN_STRIP_BYTES", "ALIASING_ROW_BYTES"]

#: source rows per strip when the rows alias in the L1 cache (16 float32 are one 64-byte cache
#: line of an output row; 32 and 64 were slower there)
STRIP_ROWS = 16
#: source rows per strip for the other row lengths (fewer, longer copies; 16 and 32 were slower)
WIDE_STRIP_ROWS = 64
#: smaller matrices are transposed in one call (the strips' Python loop would cost more: about
#: even at 64 KiB; a fully connected layer's 32 x 1536 float32 weight of the pyopen wake-word
#: nets, 192 KiB: 49 us in one call, 22 us in strips; it was 256 KiB before)
MIN_STRIP_BYTES = 128 << 10
#: source rows whose byte length is a multiple of this take :data:`STRIP_ROWS` strips
ALIASING_ROW_BYTES = 1024


def transposed(a: np.ndarray) -> np.ndarray:
    """``a.T`` of a 2-D array as a new C-contiguous array (``np.ascontiguousarray(a.T)``, faster)."""
    if a.ndim != 2 or a.nbytes < MIN_STRIP_BYTES:
        return np.ascontiguousarray(a.T)
    rows = WIDE_STRIP_ROWS if (a.shape[1] * a.itemsize) % ALIASING_ROW_BYTES else STRIP_ROWS
    n = a.shape[0]
    out = np.empty((a.shape[1], n), a.dtype)
    for i in range(0, n, rows):
        out[:, i:i + rows] = a[i:i + rows].T
    return out
