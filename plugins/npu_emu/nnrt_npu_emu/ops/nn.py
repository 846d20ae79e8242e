"""Convolution, pooling, fully-connected and normalization ops."""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nnrt_core.ir import Node
from nnrt_npu_emu.numerics import f32
from nnrt_npu_emu.ops.common import Step, Unsupported, attr_ints, kernel, op, store

__all__ = ["conv_nd", "pool_nd"]


# ------------------------------------------------------------------ helpers
def _spatial_attrs(node: Node, cx, k: list[int]) -> tuple[list[int], list[int], list[int]]:
    sp = len(k)
    strides = attr_ints(node, "strides", [1] * sp)
    dil = attr_ints(node, "dilations", [1] * sp)
    pads = attr_ints(node, "pads", [0] * (2 * sp))
    auto = node.attr("auto_pad", "NOTSET")
    if auto == "SAME_LOWER":
        raise Unsupported("auto_pad=SAME_LOWER is not supported by the chip (only NOTSET, VALID, SAME_UPPER)")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER"):
        raise Unsupported(f"auto_pad={auto!r} is not supported")
    if auto == "VALID":
        pads = [0] * (2 * sp)
    elif auto == "SAME_UPPER":
        xin = cx.shape(node.inputs[0])[2:]
        pads = [0] * (2 * sp)
        for i in range(sp):
            eff = (k[i] - 1) * dil[i] + 1
            total = max((math.ceil(xin[i] / strides[i]) - 1) * strides[i] + eff - xin[i], 0)
            pads[i], pads[sp + i] = total // 2, total - total // 2
    if len(strides) != sp or len(dil) != sp or len(pads) != 2 * sp:
        raise Unsupported("strides/dilations/pads do not match the kernel rank")
    return strides, pads, dil


def _pad_crop(x: np.ndarray, begin: list[int], end: list[int], value: float = 0.0) -> np.ndarray:
    """Pad (positive) or crop (negative) the spatial axes of an NC... tensor."""
    sp = len(begin)
    if any(p > 0 for p in begin + end):
        widths = [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
        x = np.pad(x, widths, constant_values=value)
    if any(p < 0 for p in begin + end):
        idx = (slice(None), slice(None)) + tuple(
            slice(-b if b < 0 else 0, x.shape[2 + i] + e if e < 0 else None) for i, (b, e) in enumerate(zip(begin, end)))
        x = x[idx]
    return x


def _windows(xp: np.ndarray, k, strides, dil, osz) -> np.ndarray:
    """(N, C, *out, *k) strided view of the windows of padded input ``xp``."""
    sp = len(k)
    eff = [(k[i] - 1) * dil[i] + 1 for i in range(sp)]
    v = sliding_window_view(xp, eff, axis=tuple(range(2, 2 + sp)))
    idx = (slice(None), slice(None)) + tuple(slice(0, (osz[i] - 1) * strides[i] + 1, strides[i]) for i in range(sp)) \
        + tuple(slice(None, None, d) for d in dil)
    return v[idx]


def conv_nd(x: np.ndarray, w: np.ndarray, strides, pads, dil, group: int, lhs_dilation=None) -> np.ndarray:
    """N-d grouped convolution in fp32: im2col + batched GEMM (no per-channel loops)."""
    sp = x.ndim - 2
    N, C = x.shape[:2]
    if lhs_dilation and any(l > 1 for l in lhs_dilation):
        size = [(x.shape[2 + i] - 1) * lhs_dilation[i] + 1 for i in range(sp)]
        xz = np.zeros((N, C, *size), dtype=x.dtype)
        xz[(slice(None), slice(None)) + tuple(slice(None, None, l) for l in lhs_dilation)] = x
        x = xz
    xp = _pad_crop(x, list(pads[:sp]), list(pads[sp:]))
    M, k = w.shape[0], list(w.shape[2:])
    osz = [(xp.shape[2 + i] - ((k[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(sp)]
    G = group
    Cg, Mg = C // G, M // G
    P, K = int(np.prod(osz)), Cg * int(np.prod(k))
    if G == 1 and all(v == 1 for v in k):
        xs = xp[(slice(None), slice(None)) + tuple(slice(0, (osz[i] - 1) * strides[i] + 1, strides[i]) for i in range(sp))]
        y = np.matmul(w.reshape(M, C), xs.reshape(N, C, P))
        return y.reshape(N, M, *osz)
    v = _windows(xp, k, strides, dil, osz).reshape(N, G, Cg, *osz, *k)
    perm = (0, 1) + tuple(range(3, 3 + sp)) + (2,) + tuple(range(3 + sp, 3 + 2 * sp))
    cols = v.transpose(perm).reshape(N, G, P, K)
    wm = w.reshape(G, Mg, K).transpose(0, 2, 1)
    y = np.matmul(cols, wm[None])  # (N, G, P, Mg)
    return y.transpose(0, 1, 3, 2).reshape(N, M, *osz)


# --------------------------------------------------------------------- conv
def _check_conv(node: Node, cx) -> str | None:
    xs = cx.shape(node.inputs[0])
    if len(xs) < 3:
        return "Conv input must have rank >= 3"
    if len(cx.shape(node.inputs[1])) != len(xs):
        return "Conv weights rank does not match the input"
    return None


@op("Conv", check=_check_conv, int8="int")
def _lower_conv(node: Node, cx) -> list[Step]:
    w_shape = cx.shape(node.inputs[1])
    k = attr_ints(node, "kernel_shape", w_shape[2:])
    if list(k) != list(w_shape[2:]):
        raise Unsupported("kernel_shape does not match the weights")
    strides, pads, dil = _spatial_attrs(node, cx, k)
    group = int(node.attr("group", 1))
    y = cx.shape(node.outputs[0])
    macs = int(np.prod(y)) * (w_shape[1]) * int(np.prod(k))
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    return [Step("conv", [node.inputs[0], node.inputs[1], bias], [node.outputs[0]],
                 {"strides": strides, "pads": pads, "dilations": dil, "group": group}, macs)]


@kernel("conv")
def _k_conv(ins, outs, a):
    x, w = f32(ins[0]), f32(ins[1])
    y = conv_nd(x, w, a["strides"], a["pads"], a["dilations"], a["group"], a.get("lhs_dilation"))
    if len(ins) > 2 and ins[2] is not None:
        y += f32(ins[2]).reshape((1, -1) + (1,) * (x.ndim - 2))
    store(outs[0], y)


def _check_convt(node: Node, cx) -> str | None:
    if not cx.is_const(node.inputs[1]):
        return "ConvTranspose weights must be constant"
    if len(node.inputs) > 2 and node.inputs[2] is not None and not cx.is_const(node.inputs[2]):
        return "ConvTranspose bias must be constant"
    return None


@op("ConvTranspose", check=_check_convt)
def _lower_convt(node: Node, cx) -> list[Step]:
    xs, w_shape, ys = cx.shape(node.inputs[0]), cx.shape(node.inputs[1]), cx.shape(node.outputs[0])
    sp = len(xs) - 2
    k = list(w_shape[2:])
    strides = attr_ints(node, "strides", [1] * sp)
    dil = attr_ints(node, "dilations", [1] * sp)
    opad = attr_ints(node, "output_padding", [0] * sp)
    group = int(node.attr("group", 1))
    auto = node.attr("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={auto!r} is not supported")
    pads = attr_ints(node, "pads", None)
    if pads is None or node.attr("output_shape") is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * sp)
        if auto != "VALID" or node.attr("output_shape") is not None:
            for i in range(sp):
                total = strides[i] * (xs[2 + i] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1 - ys[2 + i]
                if total < 0:  # output_shape larger than the natural size: extra rows at the end
                    pads[i], pads[sp + i] = 0, total - opad[i]
                elif auto == "SAME_UPPER":
                    pads[i], pads[sp + i] = total // 2, total - total // 2
                else:
                    pads[i], pads[sp + i] = total - total // 2, total // 2
    C, Mg = w_shape[0], w_shape[1]
    w = cx.const(node.inputs[1]).astype(np.float32)
    wc = w.reshape(group, C // group, Mg, *k).swapaxes(1, 2).reshape(group * Mg, C // group, *k)
    wc = np.ascontiguousarray(wc[(slice(None), slice(None)) + (slice(None, None, -1),) * sp])
    cpads = [dil[i] * (k[i] - 1) - pads[i] for i in range(sp)] + \
            [dil[i] * (k[i] - 1) - pads[sp + i] + opad[i] for i in range(sp)]
    macs = int(np.prod(xs)) * Mg * int(np.prod(k))
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    return [Step("conv", [node.inputs[0], wc, bias], [node.outputs[0]],
                 {"strides": [1] * sp, "pads": cpads, "dilations": dil, "group": group, "lhs_dilation": strides},
                 macs)]


# ------------------------------------------------------------------ pooling
def pool_nd(x: np.ndarray, kind: str, k, strides, pads, dil, osz, count_include_pad: bool) -> np.ndarray:
    sp = len(k)
    ins = x.shape[2:]
    begin = list(pads[:sp])
    need = [(osz[i] - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 for i in range(sp)]
    end = [need[i] - ins[i] - begin[i] for i in range(sp)]
    if kind == "max":
        fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = _pad_crop(x, begin, end, fill)
        v = _windows(xp, k, strides, dil, osz)
        return v.max(axis=tuple(range(-sp, 0)))
    xp = _pad_crop(f32(x), begin, end, 0.0)
    s = _windows(xp, k, strides, dil, osz).sum(axis=tuple(range(-sp, 0)), dtype=np.float32)
    mask = np.ones((1, 1) + tuple(ins), np.float32)
    if count_include_pad:
        explicit_end = list(pads[sp:])
        mask = _pad_crop(mask, begin, [min(e, pe) for e, pe in zip(end, explicit_end)], 1.0)
        mask = _pad_crop(mask, [0] * sp, [end[i] - min(end[i], explicit_end[i]) for i in range(sp)], 0.0)
    else:
        mask = _pad_crop(mask, begin, end, 0.0)
    cnt = _windows(mask, k, strides, dil, osz).sum(axis=tuple(range(-sp, 0)), dtype=np.float32)
    return s / np.maximum(cnt, 1.0)


def _lower_pool(kind: str):
    def lower(node: Node, cx) -> list[Step]:
        xs, ys = cx.shape(node.inputs[0]), cx.shape(node.outputs[0])
        if len(xs) < 3:
            raise Unsupported("pooling needs rank >= 3")
        k = attr_ints(node, "kernel_shape")
        if k is None:
            raise Unsupported("kernel_shape is required")
        if node.attr("storage_order", 0) != 0:
            raise Unsupported("storage_order=1 is not supported")
        if len(node.outputs) > 1 and cx.live(node.outputs[1]):
            raise Unsupported("MaxPool Indices output is not supported by the chip")
        strides, pads, dil = _spatial_attrs(node, cx, k)
        osz = list(ys[2:])
        return [Step("pool", [node.inputs[0]], [node.outputs[0]],
                     {"kind": kind, "k": k, "strides": strides, "pads": pads, "dilations": dil, "osz": osz,
                      "count_include_pad": bool(node.attr("count_include_pad", 0))},
                     int(np.prod(ys)) * int(np.prod(k)))]
    return lower


op("MaxPool", int8="generic")(_lower_pool("max"))
op("AveragePool", int8="generic")(_lower_pool("avg"))


@kernel("pool")
def _k_pool(ins, outs, a):
    store(outs[0], pool_nd(ins[0], a["kind"], a["k"], a["strides"], a["pads"], a["dilations"], a["osz"],
                           a["count_include_pad"]))


def _lower_global(kind: str):
    def lower(node: Node, cx) -> list[Step]:
        xs = cx.shape(node.inputs[0])
        if len(xs) < 3:
            raise Unsupported("global pooling needs rank >= 3")
        return [Step("reduce", [node.inputs[0]], [node.outputs[0]],
                     {"fn": kind, "axes": list(range(2, len(xs))), "keepdims": True}, int(np.prod(xs)))]
    return lower


op("GlobalAveragePool")(_lower_global("mean"))
op("GlobalMaxPool")(_lower_global("max"))


# ---------------------------------------------------------- fully connected
def _check_gemm(node: Node, cx) -> str | None:
    if len(cx.shape(node.inputs[0])) != 2 or len(cx.shape(node.inputs[1])) != 2:
        return "Gemm inputs must be 2-D"
    return None


@op("Gemm", check=_check_gemm, int8="int")
def _lower_gemm(node: Node, cx) -> list[Step]:
    a = node.inputs[0]
    ys = cx.shape(node.outputs[0])
    ta = int(node.attr("transA", 0))
    K = cx.shape(a)[0 if ta else 1]
    c = node.inputs[2] if len(node.inputs) > 2 else None
    return [Step("gemm", [a, node.inputs[1], c], [node.outputs[0]],
                 {"transA": ta, "transB": int(node.attr("transB", 0)),
                  "alpha": float(node.attr("alpha", 1.0)), "beta": float(node.attr("beta", 1.0))},
                 int(np.prod(ys)) * K)]


@kernel("gemm")
def _k_gemm(ins, outs, a):
    A, B = f32(ins[0]), f32(ins[1])
    if a["transA"]:
        A = A.T
    if a["transB"]:
        B = B.T
    y = A @ B
    if a["alpha"] != 1.0:
        y *= a["alpha"]
    if len(ins) > 2 and ins[2] is not None:
        y = y + a["beta"] * f32(ins[2])
    store(outs[0], y)


@op("MatMul", int8="int")
def _lower_matmul(node: Node, cx) -> list[Step]:
    a, b = cx.shape(node.inputs[0]), cx.shape(node.inputs[1])
    if len(a) < 1 or len(b) < 1:
        raise Unsupported("MatMul of scalars")
    K = a[-1]
    return [Step("matmul", [node.inputs[0], node.inputs[1]], [node.outputs[0]], {},
                 max(int(np.prod(cx.shape(node.outputs[0]))), 1) * K)]


@kernel("matmul")
def _k_matmul(ins, outs, a):
    store(outs[0], np.matmul(f32(ins[0]), f32(ins[1])))


# ------------------------------------------------------------ normalization
def _check_bn(node: Node, cx) -> str | None:
    if any(cx.live(v) for v in node.outputs[1:]):
        return "BatchNormalization training outputs are not supported (inference only)"
    if node.attr("training_mode", 0):
        return "BatchNormalization training_mode=1 is not supported"
    if len(cx.shape(node.inputs[0])) < 2:
        return "BatchNormalization input must have rank >= 2"
    return None


@op("BatchNormalization", check=_check_bn)
def _lower_bn(node: Node, cx) -> list[Step]:
    x = node.inputs[0]
    rank = len(cx.shape(x))
    eps = float(node.attr("epsilon", 1e-5))
    if not all(cx.is_const(v) for v in node.inputs[1:5]):  # parameters computed at run time
        return [Step("batchnorm", list(node.inputs[:5]), [node.outputs[0]], {"eps": eps},
                     2 * int(np.prod(cx.shape(x))))]
    g, b, m, v = (cx.const(node.inputs[i]).astype(np.float64) for i in range(1, 5))
    scale = g / np.sqrt(v + eps)
    shift = b - m * scale
    shape = (-1,) + (1,) * (rank - 2)
    return [Step("scale_shift", [x, scale.astype(np.float32).reshape(shape), shift.astype(np.float32).reshape(shape)],
                 [node.outputs[0]], {}, int(np.prod(cx.shape(x))))]


@kernel("batchnorm")
def _k_batchnorm(ins, outs, a):
    x = f32(ins[0])
    shape = (-1,) + (1,) * (x.ndim - 2)
    g, b, m, v = (f32(t).reshape(shape) for t in ins[1:5])
    scale = g / np.sqrt(v + a["eps"])
    store(outs[0], x * scale + (b - m * scale))


@kernel("scale_shift")
def _k_scale_shift(ins, outs, a):
    store(outs[0], f32(ins[0]) * f32(ins[1]) + f32(ins[2]))


def _check_ln(node: Node, cx) -> str | None:
    if any(cx.live(v) for v in node.outputs[1:]):
        return "LayerNormalization Mean/InvStdDev outputs are not supported"
    return None


@op("LayerNormalization", check=_check_ln)
def _lower_ln(node: Node, cx) -> list[Step]:
    x = node.inputs[0]
    rank = len(cx.shape(x))
    axis = int(node.attr("axis", -1)) % rank
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    return [Step("layernorm", [x, node.inputs[1], bias], [node.outputs[0]],
                 {"axis": axis, "eps": float(node.attr("epsilon", 1e-5))}, 4 * int(np.prod(cx.shape(x))))]


@kernel("layernorm")
def _k_layernorm(ins, outs, a):
    x = f32(ins[0])
    axes = tuple(range(a["axis"], x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=axes, keepdims=True)
    y = d / np.sqrt(var + a["eps"]) * f32(ins[1])
    if len(ins) > 2 and ins[2] is not None:
        y = y + f32(ins[2])
    store(outs[0], y)


def _lower_softmax(kind: str):
    def lower(node: Node, cx) -> list[Step]:
        rank = len(cx.shape(node.inputs[0]))
        legacy = (node.opset or 13) < 13
        axis = int(node.attr("axis", 1 if legacy else -1))
        if rank == 0:
            raise Unsupported("softmax of a scalar")
        return [Step("softmax", [node.inputs[0]], [node.outputs[0]],
                     {"axis": axis % rank, "legacy": legacy, "log": kind == "log"},
                     3 * int(np.prod(cx.shape(node.inputs[0]))))]
    return lower


op("Softmax")(_lower_softmax("softmax"))
op("LogSoftmax")(_lower_softmax("log"))


@kernel("softmax")
def _k_softmax(ins, outs, a):
    x = f32(ins[0])
    shape = x.shape
    if a["legacy"]:
        x = x.reshape(int(np.prod(shape[:a["axis"]])), -1)
        axis = 1
    else:
        axis = a["axis"]
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    y = (x - m) - np.log(s) if a["log"] else e / s
    store(outs[0], y.reshape(shape))
