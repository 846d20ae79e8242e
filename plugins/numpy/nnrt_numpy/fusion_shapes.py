"""Shape tests of the NumPy backend's fusion (:mod:`nnrt_numpy.fusion`): static or symbolic
dimensions (equal symbols stand for equal sizes), per-channel operands, broadcasting."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["channel_vector", "known_shape", "fits", "may_equal", "may_broadcast", "renames"]


def channel_vector(c: np.ndarray, shape: tuple) -> np.ndarray | None:
    """``c`` as a length-C vector when ``c`` broadcast onto ``shape`` (N, C, ...)
    varies along the channel axis only (and does not grow ``shape``)."""
    r = len(shape)
    if r < 2 or c.ndim > r or not isinstance(shape[1], int):
        return None
    full = (1,) * (r - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, shape[1]):
        return None
    return np.broadcast_to(c.reshape(-1) if c.size > 1 else c.reshape(1), (shape[1],))


def known_shape(shape: Any) -> bool:
    """Rank >= 1, every dimension an int or a symbol (equal symbols: equal sizes).  A symbolic
    axis 1 (MatMul's rows: (N, T, C)) takes no per-channel tails (:func:`channel_vector`)."""
    if shape is None or len(shape) == 0:  # ufuncs return scalars for 0-d
        return False
    return not any(d is None or isinstance(d, bool) or not isinstance(d, (int, str)) for d in shape)


def fits(cshape: tuple, yshape: tuple) -> bool:
    """Whether a constant of shape ``cshape`` broadcasts onto ``yshape`` without growing it."""
    if len(cshape) > len(yshape):
        return False
    return all(d == 1 or d == yd for d, yd in zip(cshape[::-1], yshape[::-1]))


def may_equal(a: Any, b: tuple) -> bool:
    """Shapes of one rank whose dimensions are equal or symbolic on either side (a residual Add of
    an exported network: ``unk__29`` and ``unk__21`` may well be the same size; the fused add
    broadcasts as the node would when they are not)."""
    return a is not None and len(a) == len(b) and all(x == y or isinstance(x, str) or isinstance(y, str)
                                                      for x, y in zip(a, b))


def may_broadcast(a: Any, b: tuple) -> bool:
    """A tensor operand's shape ``a`` onto a chain value's ``b``: :func:`may_equal`, or of no
    higher rank with every dimension 1, equal or symbolic on either side (an attention mask
    (B, 1, 1, T) onto scores (B, H, S, T)); one that grows ``b`` at run time is broadcast as the
    unfused node would."""
    if may_equal(a, b):
        return True
    return a is not None and len(a) <= len(b) and all(
        x == 1 or x == y or isinstance(x, str) or isinstance(y, str) for x, y in zip(a[::-1], b[::-1]))


def renames(out: Any, shape: tuple) -> bool:
    """A tail's declared output shape ``out`` against its input's ``shape``: one rank, every
    dimension equal or a symbol in ``out`` (other names for the same sizes).  A static size where
    the input's is symbolic is refused: the step's output buffer could be planned for a size the
    head does not produce."""
    return out is not None and len(out) == len(shape) and all(o == y or isinstance(o, str)
                                                              for o, y in zip(out, shape))
