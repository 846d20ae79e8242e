"""TFLite shape rules: each operator's output shapes (and, for small integer
tensors, values) from its input shapes, values and options, as LiteRT's
``Prepare`` derives them.  Used by ``dynamic.py`` when a model has free input
dimensions, so declared intermediate shapes (written for one size, often with
placeholder 1s) are not trusted."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import tflite

__all__ = ["OpView", "RULES", "Shape", "fold_int"]

Shape = tuple[int, ...]


class OpView:
    """What a rule sees of one operator: input shapes, known values, options."""

    def __init__(self, ctx: Any, shapes: Sequence[Shape | None], values: Sequence[np.ndarray | None],
                 out_dtypes: Sequence[np.dtype]) -> None:
        self.ctx = ctx  # an OpContext-like object (desc, op, fail, options)
        self.shapes = list(shapes)
        self.values = list(values)
        self.out_dtypes = list(out_dtypes)

    def shape(self, i: int) -> Shape:
        s = self.shapes[i] if i < len(self.shapes) else None
        if s is None:
            raise self.ctx.fail(f"input {i} is missing")
        return s

    def ints(self, i: int) -> list[int]:
        v = self.values[i] if i < len(self.values) else None
        if v is None:
            raise self.ctx.fail(f"input {i} must be a constant (or computable at import from the input shapes)")
        return [int(x) for x in np.asarray(v).reshape(-1)]

    def opts(self, cls: type) -> Any:
        return self.ctx.options(cls)

    def axis(self, a: int, rank: int) -> int:
        if not -rank <= a < rank:
            raise self.ctx.fail(f"axis {a} is out of range for rank {rank}")
        return a % rank


def _same(v: OpView) -> list[Shape]:
    return [v.shape(0)]


def _broadcast(v: OpView) -> list[Shape]:
    try:
        return [tuple(np.broadcast_shapes(*[v.shape(i) for i in range(len(v.shapes))]))]
    except ValueError as e:
        raise v.ctx.fail(f"input shapes {[list(s) for s in v.shapes]} do not broadcast") from e


def _reshape(v: OpView) -> list[Shape]:
    if len(v.shapes) > 1 and v.shapes[1] is not None:
        target = v.ints(1)
    else:
        target = [int(d) for d in v.opts(tflite.ReshapeOptions).NewShapeAsNumpy()]
    return [_resolve(v, v.shape(0), target)]


def _resolve(v: OpView, src: Shape, target: list[int]) -> Shape:
    total = math.prod(src)
    known = math.prod(d for d in target if d != -1)
    if target.count(-1) > 1 or (target.count(-1) == 1 and (known == 0 or total % known)):
        raise v.ctx.fail(f"cannot reshape {list(src)} to {target}")
    out = tuple(total // known if d == -1 else d for d in target)
    if math.prod(out) != total:
        raise v.ctx.fail(f"cannot reshape {list(src)} to {target}")
    return out


def _expand_dims(v: OpView) -> list[Shape]:
    s = list(v.shape(0))
    a = v.ints(1)[0]
    s.insert(v.axis(a, len(s) + 1), 1)
    return [tuple(s)]


def _squeeze(v: OpView) -> list[Shape]:
    s = v.shape(0)
    dims = {v.axis(int(d), len(s)) for d in v.opts(tflite.SqueezeOptions).SqueezeDimsAsNumpy()} \
        if v.opts(tflite.SqueezeOptions).SqueezeDimsLength() else {i for i, d in enumerate(s) if d == 1}
    return [tuple(d for i, d in enumerate(s) if i not in dims)]


def _transpose(v: OpView) -> list[Shape]:
    s, perm = v.shape(0), v.ints(1)
    if sorted(perm) != list(range(len(s))):
        raise v.ctx.fail(f"perm {perm} is no permutation of rank {len(s)}")
    return [tuple(s[p] for p in perm)]


def _spatial(size: int, k: int, stride: int, dil: int, padding: int) -> int:
    eff = (k - 1) * dil + 1
    return -(-size // stride) if padding == tflite.Padding.SAME else max((size - eff) // stride + 1, 0)


def _conv(v: OpView) -> list[Shape]:
    dw = v.ctx.op_name == "DEPTHWISE_CONV_2D"
    o = v.opts(tflite.DepthwiseConv2DOptions if dw else tflite.Conv2DOptions)
    n, h, w, _ = v.shape(0)
    oc, kh, kw = v.shape(1)[3] if dw else v.shape(1)[0], v.shape(1)[1], v.shape(1)[2]
    return [(n, _spatial(h, kh, o.StrideH(), o.DilationHFactor(), o.Padding()),
             _spatial(w, kw, o.StrideW(), o.DilationWFactor(), o.Padding()), oc)]


def _pool(v: OpView) -> list[Shape]:
    o = v.opts(tflite.Pool2DOptions)
    n, h, w, c = v.shape(0)
    return [(n, _spatial(h, o.FilterHeight(), o.StrideH(), 1, o.Padding()),
             _spatial(w, o.FilterWidth(), o.StrideW(), 1, o.Padding()), c)]


def _fully_connected(v: OpView) -> list[Shape]:
    s, (units, k) = v.shape(0), v.shape(1)
    if v.opts(tflite.FullyConnectedOptions).KeepNumDims():
        return [tuple(s[:-1]) + (units,)]
    if math.prod(s) % k:
        raise v.ctx.fail(f"input {list(s)} is not a multiple of the weights' depth {k}")
    return [(math.prod(s) // k, units)]


def _batch_matmul(v: OpView) -> list[Shape]:
    o = v.opts(tflite.BatchMatMulOptions)
    a, b = list(v.shape(0)), list(v.shape(1))
    m, k = (a[-1], a[-2]) if o.AdjX() else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if o.AdjY() else (b[-2], b[-1])
    if k != k2:
        raise v.ctx.fail(f"inner dimensions {k} and {k2} differ")
    return [tuple(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))) + (m, n)]


def _concat(v: OpView) -> list[Shape]:
    shapes = [v.shape(i) for i in range(len(v.shapes))]
    a = v.axis(v.opts(tflite.ConcatenationOptions).Axis(), len(shapes[0]))
    out = list(shapes[0])
    out[a] = sum(s[a] for s in shapes)
    return [tuple(out)]


def _pack(v: OpView) -> list[Shape]:
    s = list(v.shape(0))
    s.insert(v.axis(v.opts(tflite.PackOptions).Axis(), len(s) + 1), len(v.shapes))
    return [tuple(s)]


def _gather(v: OpView) -> list[Shape]:
    p = v.shape(0)
    a = v.axis(v.opts(tflite.GatherOptions).Axis(), len(p))
    return [tuple(p[:a]) + tuple(v.shape(1)) + tuple(p[a + 1:])]


def _reduce(v: OpView) -> list[Shape]:
    s = v.shape(0)
    axes = {v.axis(a, len(s)) for a in v.ints(1)}
    keep = v.opts(tflite.ReducerOptions).KeepDims()
    return [tuple((1 if i in axes else d) for i, d in enumerate(s) if keep or i not in axes)]


def _pad(v: OpView) -> list[Shape]:
    s, p = v.shape(0), v.ints(1)
    if len(p) != 2 * len(s):
        raise v.ctx.fail(f"paddings {p} do not fit rank {len(s)}")
    return [tuple(d + p[2 * i] + p[2 * i + 1] for i, d in enumerate(s))]


def _split_v(v: OpView) -> list[Shape]:
    s, sizes = v.shape(0), v.ints(1)
    a = v.axis(v.ints(2)[0], len(s))
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = s[a] - sum(x for x in sizes if x != -1)
    return [tuple(x if i == a else d for i, d in enumerate(s)) for x in sizes]


def _split(v: OpView) -> list[Shape]:
    s = v.shape(1)
    a = v.axis(v.ints(0)[0], len(s))
    n = v.opts(tflite.SplitOptions).NumSplits()
    if n <= 0 or s[a] % n:
        raise v.ctx.fail(f"cannot split size {s[a]} into {n}")
    return [tuple(s[a] // n if i == a else d for i, d in enumerate(s))] * n


def _slice(v: OpView) -> list[Shape]:
    s, begin, size = v.shape(0), v.ints(1), v.ints(2)
    return [tuple(d - b if z == -1 else z for d, b, z in zip(s, begin, size))]


def strided_index(v: OpView, s: Shape) -> tuple[tuple[slice, ...], list[int]]:
    """The numpy index of a STRIDED_SLICE on shape ``s``, and the shrunk axes."""
    o = v.opts(tflite.StridedSliceOptions)
    if o.EllipsisMask() or o.NewAxisMask():
        raise v.ctx.fail("ellipsis_mask and new_axis_mask are not supported")
    begin, end, strides = v.ints(1), v.ints(2), v.ints(3)
    if o.Offset():
        end = [b + e for b, e in zip(begin, end)]
    index, shrunk = [], []
    for i, (b, e, st) in enumerate(zip(begin, end, strides)):
        if o.ShrinkAxisMask() >> i & 1:
            b = b + s[i] if b < 0 else b
            index.append(slice(b, b + 1, 1))
            shrunk.append(i)
            continue
        index.append(slice(None if o.BeginMask() >> i & 1 else b, None if o.EndMask() >> i & 1 else e, st))
    return tuple(index), shrunk


def _strided_slice(v: OpView) -> list[Shape]:
    s = v.shape(0)
    index, shrunk = strided_index(v, s)
    dims = [len(range(*sl.indices(d))) for sl, d in zip(index, s)]
    return [tuple(d for i, d in enumerate(dims) if i not in shrunk)]


def _shape(v: OpView) -> list[Shape]:
    return [(len(v.shape(0)),)]


def _rfft2d(v: OpView) -> list[Shape]:
    s, (fh, fw) = v.shape(0), v.ints(1)
    return [tuple(s[:-2]) + (fh, fw // 2 + 1)]


def _resize(v: OpView) -> list[Shape]:
    n, _, _, c = v.shape(0)
    h, w = v.ints(1)
    return [(n, h, w, c)]


def _arg(v: OpView) -> list[Shape]:
    s = v.shape(0)
    a = v.axis(v.ints(1)[0], len(s))
    return [tuple(d for i, d in enumerate(s) if i != a)]


def _unpack(v: OpView) -> list[Shape]:
    s = v.shape(0)
    a = v.axis(v.opts(tflite.UnpackOptions).Axis(), len(s))
    return [tuple(d for i, d in enumerate(s) if i != a)] * s[a]


def _from_value(j: int) -> Callable[[OpView], list[Shape]]:
    """Output shape = the integer value of input ``j`` (FILL's dims, TRANSPOSE_CONV's output_shape)."""
    return lambda v: [tuple(v.ints(j))]


def _range(v: OpView) -> list[Shape]:
    start, limit, delta = (v.ints(i)[0] for i in range(3))
    if delta == 0:
        raise v.ctx.fail("delta must not be 0")
    return [(max(-(-(limit - start) // delta), 0),)]


_UNARY = ("ABS", "CAST", "COMPLEX_ABS", "COS", "DEQUANTIZE", "ELU", "EXP", "FLOOR", "CEIL", "HARD_SWISH", "IMAG",
          "L2_NORMALIZATION", "LEAKY_RELU", "LOG", "LOGISTIC", "LOG_SOFTMAX", "LOGICAL_NOT", "NEG", "QUANTIZE",
          "REAL", "RELU", "RELU6", "RELU_0_TO_1", "RELU_N1_TO_1", "REVERSE_V2", "ROUND", "RSQRT", "SIGN", "SIN",
          "SOFTMAX", "SQRT", "SQUARE", "TANH", "ZEROS_LIKE")
_BINARY = ("ADD", "DIV", "EQUAL", "FLOOR_DIV", "FLOOR_MOD", "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL",
           "LOGICAL_AND", "LOGICAL_OR", "MAXIMUM", "MINIMUM", "MUL", "NOT_EQUAL", "POW", "PRELU",
           "SELECT", "SELECT_V2", "SQUARED_DIFFERENCE", "SUB")

#: builtin operator -> shape rule
RULES: dict[str, Callable[[OpView], list[Shape]]] = {
    **dict.fromkeys(_UNARY, _same), **dict.fromkeys(_BINARY, _broadcast),
    "RESHAPE": _reshape, "EXPAND_DIMS": _expand_dims, "SQUEEZE": _squeeze, "TRANSPOSE": _transpose,
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "AVERAGE_POOL_2D": _pool, "MAX_POOL_2D": _pool,
    "FULLY_CONNECTED": _fully_connected, "BATCH_MATMUL": _batch_matmul, "CONCATENATION": _concat,
    "PACK": _pack, "UNPACK": _unpack, "GATHER": _gather, "PAD": _pad, "PADV2": _pad, "MIRROR_PAD": _pad,
    "SPLIT": _split,
    "SPLIT_V": _split_v, "SLICE": _slice, "STRIDED_SLICE": _strided_slice, "SHAPE": _shape, "RANGE": _range,
    "FILL": _from_value(0), "TRANSPOSE_CONV": _from_value(0), "RFFT2D": _rfft2d, "ARG_MAX": _arg,
    "ARG_MIN": _arg, "RESIZE_BILINEAR": _resize, "RESIZE_NEAREST_NEIGHBOR": _resize,
    **dict.fromkeys(("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY"), _reduce),
}

_INT_FOLD: dict[str, Callable[..., np.ndarray]] = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "FLOOR_DIV": np.floor_divide, "FLOOR_MOD": np.mod,
    "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
}
_REDUCE_FOLD = {"REDUCE_PROD": np.prod, "SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}


def fold_int(v: OpView, out_shapes: list[Shape]) -> list[np.ndarray] | None:
    """The values of an operator's integer outputs when every input value is
    known (shape arithmetic: SHAPE, PACK, GATHER, slices...); ``None`` otherwise."""
    name = v.ctx.op_name
    if name == "SHAPE":
        return [np.array(v.shape(0), v.out_dtypes[0])]
    if name == "FILL" and v.values[1] is not None:
        return [np.full(out_shapes[0], np.asarray(v.values[1]).reshape(()), v.out_dtypes[0])]
    if any(x is None for x in v.values) or any(dt.kind not in "iu" for dt in v.out_dtypes):
        return None
    xs = [np.asarray(x) for x in v.values]
    dt = v.out_dtypes[0]
    if name in _INT_FOLD:
        out = _INT_FOLD[name](xs[0], xs[1])
    elif name in _REDUCE_FOLD:
        out = _REDUCE_FOLD[name](xs[0], axis=tuple(int(a) for a in xs[1].reshape(-1)))
    elif name == "PACK":
        out = np.stack(xs, axis=v.axis(v.opts(tflite.PackOptions).Axis(), xs[0].ndim + 1))
    elif name == "CONCATENATION":
        out = np.concatenate(xs, axis=v.axis(v.opts(tflite.ConcatenationOptions).Axis(), xs[0].ndim))
    elif name == "GATHER":
        out = np.take(xs[0], xs[1], axis=v.axis(v.opts(tflite.GatherOptions).Axis(), xs[0].ndim))
    elif name == "STRIDED_SLICE":
        out = xs[0][strided_index(v, xs[0].shape)[0]]
    elif name == "SLICE":
        out = xs[0][tuple(slice(b, b + d) for b, d in zip(v.ints(1), out_shapes[0]))]
    elif name in ("SPLIT_V", "SPLIT", "UNPACK"):
        return _fold_split(v, xs, out_shapes)
    elif name == "RANGE":
        out = np.arange(int(xs[0]), int(xs[1]), int(xs[2]))
    elif name in ("CAST", "RESHAPE", "EXPAND_DIMS", "SQUEEZE"):
        out = xs[0]
    else:
        return None
    return [np.asarray(out).astype(dt).reshape(out_shapes[0])]


def _fold_split(v: OpView, xs: list[np.ndarray], out_shapes: list[Shape]) -> list[np.ndarray]:
    data = xs[1] if v.ctx.op_name == "SPLIT" else xs[0]
    if v.ctx.op_name == "UNPACK":
        a = v.axis(v.opts(tflite.UnpackOptions).Axis(), data.ndim)
        return [np.take(data, i, axis=a).astype(dt) for i, dt in enumerate(v.out_dtypes)]
    a = v.axis(int(xs[0].reshape(-1)[0]) if v.ctx.op_name == "SPLIT" else int(xs[2].reshape(-1)[0]), data.ndim)
    cuts = np.cumsum([s[a] for s in out_shapes])[:-1]
    return [p.astype(dt).reshape(s) for p, dt, s in zip(np.split(data, cuts, axis=a), v.out_dtypes, out_shapes)]
