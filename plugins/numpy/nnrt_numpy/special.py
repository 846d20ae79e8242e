"""``scipy.special`` functions the kernels use, imported on first use.

SciPy takes 100-200 ms to import (``scipy.special`` pulls in its array-API
layer): a process pays it only when a model has a node that needs ``expit``,
``erf`` or ``erfinv`` (Sigmoid, Gelu, Erf, SwiGLU, probit tree ensembles...),
and kernels call :func:`load` while compiling so the first run does not.
"""
from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

__all__ = ["load", "expit", "erf", "erfinv"]

_module: ModuleType | None = None
_lock = threading.Lock()


def load() -> ModuleType:
    """``scipy.special``, imported once."""
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                import scipy.special

                _module = scipy.special
    return _module


def expit(x: Any, out: Any = None) -> Any:
    """Logistic sigmoid (``scipy.special.expit``)."""
    return load().expit(x) if out is None else load().expit(x, out=out)


def erf(x: Any) -> Any:
    """Error function (``scipy.special.erf``)."""
    return load().erf(x)


def erfinv(x: Any) -> Any:
    """Inverse error function (``scipy.special.erfinv``)."""
    return load().erfinv(x)
