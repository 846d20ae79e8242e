"""A 2-D convolution by its definition (float64), the oracle of the emulator's conv kernel tests."""
from __future__ import annotations

import itertools

import numpy as np

__all__ = ["conv_direct"]


def conv_direct(x, w, strides, pads, dil, group):
    """Convolution by its definition, in float64 (2-D)."""
    N, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    OH = (xp.shape[2] - (KH - 1) * dil[0] - 1) // strides[0] + 1
    OW = (xp.shape[3] - (KW - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((N, M, OH, OW))
    Mg = M // group
    for m, i, j in itertools.product(range(M), range(KH), range(KW)):
        g = m // Mg
        patch = xp[:, g * Cg:(g + 1) * Cg, i * dil[0]:i * dil[0] + (OH - 1) * strides[0] + 1:strides[0],
                   j * dil[1]:j * dil[1] + (OW - 1) * strides[1] + 1:strides[1]]
        y[:, m] += np.einsum("nchw,c->nhw", patch, w[m, :, i, j].astype(np.float64))
    return y
