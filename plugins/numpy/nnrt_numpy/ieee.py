"""IEEE arithmetic for a whole program run.

ONNX kernels follow IEEE 754: 1/0 is inf, log(-1) is NaN, an overflow gives
inf.  numpy would warn (or raise, under the caller's ``np.seterr``), so every
program run turns numpy's floating-point error handling off for its duration
and restores the caller's afterwards: :func:`ieee_arithmetic` decorates the
run methods.

Once per run, not per elementwise kernel: that matters for small graphs.  On
numpy 2 the decorator is ``np.errstate(all="ignore")`` used as a function
decorator (public API; the error state is a ``ContextVar`` and the decorator
keeps the reset token per call, so one instance serves every thread and
nested runs).  It costs about 0.4 us a run where an ``np.errstate`` block
costs about 1.2 us (a ``with`` block builds a new instance each time).
numpy 1.x keeps the old state on the instance, so there every call gets its
own ``np.errstate``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import numpy as np

__all__ = ["ieee_arithmetic"]

F = TypeVar("F", bound=Callable[..., Any])

#: numpy >= 2 keeps the decorator's reset token per call (thread-safe, reentrant)
_TOKEN_PER_CALL = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def ieee_arithmetic(run: F) -> F:
    """Decorate ``run`` so it executes with numpy's floating-point errors
    ignored, the caller's error handling restored when it returns or raises."""
    if _TOKEN_PER_CALL:
        return np.errstate(all="ignore")(run)

    @functools.wraps(run)  # pragma: no cover - numpy 1.x
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return run(*args, **kwargs)

    return wrapped  # type: ignore[return-value]  # pragma: no cover
