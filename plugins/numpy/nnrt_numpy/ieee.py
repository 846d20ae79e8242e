"""IEEE arithmetic for a whole program run.

ONNX kernels follow IEEE 754: 1/0 is inf, log(-1) is NaN, an overflow gives
inf.  numpy would warn (or raise, under the caller's ``np.seterr``), so every
program run turns numpy's floating-point error handling off for its duration
and restores the caller's afterwards: :func:`enter` / :func:`leave`.

On numpy 2 that state is a ``ContextVar`` holding an error-mode object, so we
set it directly: about 0.14 us a run, where an ``np.errstate`` block costs
about 0.9 us (once per run instead of once per elementwise kernel matters
for small graphs).  Other numpy versions use ``np.errstate``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["enter", "leave"]

try:  # numpy >= 2: the error state is a ContextVar (private, so checked here)
    from numpy._core import _ufunc_config

    _STATE = _ufunc_config._extobj_contextvar
    with np.errstate(all="ignore"):
        _IGNORE = _STATE.get()
except (ImportError, AttributeError):  # pragma: no cover - numpy 1.x
    _STATE = None


def enter() -> Any:
    """Turn floating-point errors off; returns what :func:`leave` needs."""
    if _STATE is not None:
        return _STATE.set(_IGNORE)
    state = np.errstate(all="ignore")  # pragma: no cover - numpy 1.x
    state.__enter__()  # pragma: no cover
    return state  # pragma: no cover


def leave(token: Any) -> None:
    """Restore the caller's floating-point error handling."""
    if _STATE is not None:
        _STATE.reset(token)
    else:  # pragma: no cover - numpy 1.x
        token.__exit__(None, None, None)
