"""LabelEncoder (ai.onnx.ml): map every element through a key -> value table.

* opset 1: ``classes_strings``; string input -> int64 index (``default_int64``
  when absent), int64 input -> string (``default_string`` when out of range).
* opset 2: ``keys_{floats,int64s,strings}`` / ``values_{floats,int64s,strings}``
  with ``default_{float,int64,string}``.
* opset 4: also ``keys_tensor`` / ``values_tensor`` / ``default_tensor`` (1-D
  tensors of string, int64, int32, int16, float or double).

Float keys that are NaN match every NaN input; a repeated key keeps its last value.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._util import ML

_DEFAULTS = {"floats": ("default_float", -0.0), "int64s": ("default_int64", -1),
             "strings": ("default_string", "_Unused")}
_LIST_DTYPES = {"floats": np.dtype(np.float32), "int64s": np.dtype(np.int64), "strings": np.dtype(object)}
_TENSOR_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32, np.int16, object))


def _is_str(dt: np.dtype) -> bool:
    return np.dtype(dt).kind in "OUS"


def _as_input(x: Any, fail) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind == "S":
        a = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(a)
    elif a.dtype.kind == "U":
        a = a.astype(object)
    if a.dtype not in _TENSOR_DTYPES:
        raise fail(f"X must be a string, int64, int32, int16, float or double tensor, got {a.dtype}")
    return a


class _Table:
    """A compiled key -> value mapping with a default."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, default: Any, out_dtype: np.dtype) -> None:
        self.out_dtype = np.dtype(out_dtype)
        self.default = default
        self.string_keys = _is_str(keys.dtype)
        table: dict[Any, Any] = {}
        nan_value = None
        for k, v in zip(keys.tolist(), values.tolist()):
            if not self.string_keys and isinstance(k, float) and np.isnan(k):
                nan_value = v
            else:
                table[k] = v  # later keys overwrite earlier ones
        self.table = table
        self.nan_value = nan_value
        if not self.string_keys:
            ks = np.array(list(table.keys()), dtype=keys.dtype)
            order = np.argsort(ks, kind="stable")
            self.sorted_keys = ks[order]
            self.sorted_values = np.array(list(table.values()), dtype=self.out_dtype)[order]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.string_keys:
            get, d = self.table.get, self.default
            out = np.array([get(s, d) for s in x.flat], dtype=self.out_dtype)
            return out.reshape(x.shape)
        ct = np.result_type(x.dtype, self.sorted_keys.dtype)
        xs = x.astype(ct, copy=False)
        ks = self.sorted_keys.astype(ct, copy=False)
        out = np.full(x.shape, self.default, dtype=self.out_dtype)
        if ks.size:
            idx = np.minimum(np.searchsorted(ks, xs), ks.size - 1)
            hit = ks[idx] == xs
            out[hit] = self.sorted_values[idx[hit]]
        if self.nan_value is not None and xs.dtype.kind == "f":
            out[np.isnan(xs)] = self.nan_value
        return out


class _LabelEncoderBase(Kernel):
    op_type = "LabelEncoder"
    domain = ML

    def _pick(self, node: NodeInfo, prefix: str, tensors: bool) -> tuple[str, np.ndarray]:
        kinds = ["floats", "int64s", "strings"] + (["tensor"] if tensors else [])
        given = [k for k in kinds if node.attr(f"{prefix}_{k}") is not None]
        if len(given) != 1:
            names = ", ".join(f"{prefix}_{k}" for k in kinds)
            raise self.fail(f"exactly one of {names} must be set, got {len(given)}")
        kind = given[0]
        raw = node.attr(f"{prefix}_{kind}")
        if kind == "tensor":
            arr = np.asarray(raw)
            if arr.ndim != 1:
                raise self.fail(f"{prefix}_tensor must be 1-D, got shape {arr.shape}")
            if arr.dtype not in _TENSOR_DTYPES:
                raise self.fail(f"{prefix}_tensor has unsupported element type {arr.dtype}")
        else:
            arr = np.array(list(raw), dtype=_LIST_DTYPES[kind])
        return kind, arr

    def _setup(self, node: NodeInfo) -> None:
        tensors = self.since_version >= 4
        _, keys = self._pick(node, "keys", tensors)
        vkind, values = self._pick(node, "values", tensors)
        if keys.size != values.size:
            raise self.fail(f"keys ({keys.size}) and values ({values.size}) must have the same length")
        if vkind == "tensor":
            dt = node.attr("default_tensor")
            if dt is None:
                default = "_Unused" if _is_str(values.dtype) else -1 if values.dtype.kind == "i" else -0.0
            else:
                dt = np.asarray(dt)
                if dt.size != 1 or dt.dtype != values.dtype:
                    raise self.fail(f"default_tensor must hold one {values.dtype} value, "
                                    f"got {dt.dtype} {dt.shape}")
                default = dt.reshape(()).item()
        else:
            name, fallback = _DEFAULTS[vkind]
            default = node.attr(name, fallback)
        self.keys_are_strings = _is_str(keys.dtype)
        xdt = node.dtype(0)
        if xdt is not None and _is_str(xdt) != self.keys_are_strings:
            raise self.fail(f"input type {np.dtype(xdt)} does not match the keys' type {keys.dtype}")
        self.map = _Table(keys, values, default, values.dtype)

    def __call__(self, x) -> Sequence[Any]:
        a = _as_input(x, self.fail)
        if _is_str(a.dtype) != self.keys_are_strings:
            raise self.fail(f"input type {a.dtype} does not match the keys' type")
        return (self.map(a),)


@register
class LabelEncoder1(Kernel):
    op_type = "LabelEncoder"
    domain = ML
    since_version = 1

    def _setup(self, node: NodeInfo) -> None:
        classes = node.attr("classes_strings")
        if classes is None:
            raise self.fail("missing required attribute 'classes_strings'")
        self.classes = np.array(list(classes), dtype=object)
        n = len(classes)
        self.to_int = _Table(self.classes, np.arange(n, dtype=np.int64),
                             int(node.attr("default_int64", -1)), np.dtype(np.int64))
        self.to_str = _Table(np.arange(n, dtype=np.int64), self.classes,
                             node.attr("default_string", "_Unused"), np.dtype(object))

    def __call__(self, x) -> Sequence[Any]:
        a = _as_input(x, self.fail)
        if _is_str(a.dtype):
            return (self.to_int(a),)
        if a.dtype != np.int64:
            raise self.fail(f"X must be a string or int64 tensor, got {a.dtype}")
        return (self.to_str(a),)


@register
class LabelEncoder2(_LabelEncoderBase):
    since_version = 2


@register
class LabelEncoder4(_LabelEncoderBase):
    since_version = 4
