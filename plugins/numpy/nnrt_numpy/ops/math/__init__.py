"""Operator kernels: math.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

# from . import <module>  -- one line per op module
from . import argmax, arith, bitwise, cumulative, det, einsum, range, reduce, trilu, compare, gemm, matmul, mod, pow, unary, variadic, where
