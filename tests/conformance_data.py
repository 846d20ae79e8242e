"""Conformance data restricted to what the ONNX spec defines.

onnx generates its node cases at test time with the installed numpy and
ml_dtypes.  Some cases feed values the spec leaves undefined: Cast / CastLike
from a floating-point type to an integer type is "undefined if OOR (out of
range)" (the Cast schema's doc), yet ``test_cast*_FLOAT*_to_*INT4`` cast
-9..15 to uint4.  Their expected outputs then follow whatever the generator
library did (ml_dtypes 0.6 wraps -9 to 7, 0.7 gives 0), so a backend is
"right" or "wrong" by the version installed.

``spec_defined`` rewrites such a data set so the comparison holds under any
release: out-of-range inputs are clipped into the target type's range and the
expected output there is the clipped value itself (an integer in range
converts exactly).  Elements the spec defines are left as generated.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["as_array", "assert_same", "integer_range", "spec_defined", "spec_undefined_cases", "undefined_elements"]

_CASTS = {"Cast", "CastLike"}


def integer_range(dtype: np.dtype) -> tuple[int, int] | None:
    """(lo, hi) of an integer dtype, ml_dtypes' 2- and 4-bit types included."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    if dtype.kind == "V" or dtype.isbuiltin == 2:  # ml_dtypes user types
        import ml_dtypes

        try:
            info = ml_dtypes.iinfo(dtype)
        except (TypeError, ValueError):
            return None
        return int(info.min), int(info.max)
    return None


def _is_float(dtype: np.dtype) -> bool:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return True
    if dtype.isbuiltin == 2:
        import ml_dtypes

        try:
            ml_dtypes.finfo(dtype)
        except (TypeError, ValueError):
            return False
        return True
    return False


def undefined_elements(op_type: str, x: np.ndarray, out_dtype: np.dtype) -> np.ndarray | None:
    """Mask of the elements of a cast's input whose result the spec leaves
    undefined (float -> integer out of range, NaN and infinities included), or
    None when every element is defined."""
    if op_type not in _CASTS or not _is_float(x.dtype):
        return None
    rng = integer_range(out_dtype)
    if rng is None:
        return None
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(wide) | (np.trunc(wide) < rng[0]) | (np.trunc(wide) > rng[1])
    return bad if bad.any() else None


def spec_defined(case: Any) -> list[tuple[list[Any], list[Any]]]:
    """The case's data sets, with undefined cast elements replaced as the
    module docstring says (other cases are returned unchanged)."""
    return _rewrite(case)[0]


def _rewrite(case: Any) -> tuple[list[tuple[list[Any], list[Any]]], bool]:
    from onnx import TensorProto, numpy_helper

    def arr(v: Any) -> Any:
        return numpy_helper.to_array(v) if isinstance(v, TensorProto) else v

    nodes = list(case.model.graph.node)
    if len(nodes) != 1 or nodes[0].op_type not in _CASTS:
        return list(case.data_sets), False
    fixed, changed = [], False
    for inputs, outputs in case.data_sets:
        ins, outs = [arr(v) for v in inputs], [arr(v) for v in outputs]
        x, want = np.asarray(ins[0]), np.asarray(outs[0])
        bad = undefined_elements(nodes[0].op_type, x, want.dtype)
        if bad is not None:
            lo, hi = integer_range(want.dtype)
            wide = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=hi, neginf=lo)
            clipped = np.clip(np.trunc(wide), lo, hi)
            x = np.where(bad, clipped, x.astype(np.float64)).astype(x.dtype)
            want = want.copy()
            want[bad] = clipped[bad].astype(np.int64).astype(want.dtype)
            ins[0], outs[0], changed = x, want, True
        fixed.append((ins, outs))
    return fixed, changed


def spec_undefined_cases() -> dict[str, str]:
    """``{test name + "_cpu": reason}`` of the node cases whose generated data
    hold elements the spec leaves undefined (run through ``spec_defined`` by
    their own tests instead of onnx's runner)."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    return {f"{case.name}_cpu": ("float -> integer Cast out of range is undefined by the spec; the generated "
                                  "expectation follows the generator's ml_dtypes (checked on spec_defined data)")
            for case in cases if case.kind == "node" and case.data_sets and _rewrite(case)[1]}


def as_array(x: Any) -> Any:
    """A case's value as numpy (TensorProto, numpy scalar, or a list of them for sequences)."""
    from onnx import TensorProto, numpy_helper

    if isinstance(x, TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, list):
        return [as_array(e) for e in x]
    return x


def assert_same(want: Any, got: Any, rtol: float, atol: float) -> None:
    """A backend's output against a case's expected one: sequences element by
    element, strings exactly, dtypes equal, ml_dtypes values compared as float32."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for w, g in zip(want, got):
            assert_same(w, g, rtol, atol)
        return
    if want is None:
        assert got is None
        return
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape
    if want.dtype.kind in "OUS":
        assert got.dtype.kind in "OUS" and (got == want).all()
        return
    assert got.dtype == want.dtype
    if want.dtype.kind not in "biufc":  # ml_dtypes (bfloat16, float8, int4...)
        want, got = want.astype(np.float32), got.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
