"""String tensor helpers (strings are numpy object arrays of ``str``)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def as_strings(x: Any, fail: Callable[[str], Exception], name: str = "input") -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "OUS":
        raise fail(f"{name} must be a string tensor, got {a.dtype}")
    if a.dtype.kind == "S":
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(a)
    return a.astype(object)


def str_attr(v: Any, default: str = "") -> str:
    if v is None:
        return default
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)
