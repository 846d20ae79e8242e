"""Convolution, pooling, fully-connected and normalization ops."""
from __future__ import annotations

import math

import numpy as np

from nnrt_core.ir import Node
from nnrt_npu_emu.numerics import f32
from nnrt_npu_emu.ops.common import Step, Unsupported, attr_ints, kernel, op, store, store_kernel
from nnrt_npu_emu.ops.spatial import conv_nd, pool_nd
from nnrt_numpy.host_kernels import resolve_pads, window_misfit

__all__ = ["MAX_POOL_TAPS", "conv_nd", "pool_nd"]

#: the most taps one pooling window may hold on the chip (the emulator loops over taps on the host)
MAX_POOL_TAPS = 1 << 16


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
    xs = cx.shape(node.inputs[0])
    padded = int(np.prod(xs[:2], dtype=np.int64)) * math.prod(xs[2 + i] + pads[i] + pads[sp + i] for i in range(sp))
    if padded * 4 > cx.profile.device_memory_bytes:  # the chip pads in its workspace
        raise Unsupported(f"the padded input ({padded * 4} bytes) is larger than the device memory of chip "
                          f"{cx.profile.name!r} ({cx.profile.device_memory_bytes} bytes)")
    return strides, pads, dil


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


def _conv_bias(ins) -> np.ndarray | None:
    return f32(ins[2]) if len(ins) > 2 and ins[2] is not None else None


@kernel("conv")
def _k_conv(ins, outs, a):
    x, out = ins[0], outs[0]
    y = conv_nd(x, f32(ins[1]), a["strides"], a["pads"], a["dilations"], a["group"], a.get("lhs_dilation"),
                out=out if out.dtype == np.float32 else None, bias=_conv_bias(ins))
    store(out, y, owned=True)


@store_kernel("conv")
def _k_conv_store(ins, outs, a, post):
    """``conv`` into an fp32 shadow of an fp16 store, rounding each finished piece (bias added first)."""
    conv_nd(ins[0], f32(ins[1]), a["strides"], a["pads"], a["dilations"], a["group"], a.get("lhs_dilation"),
            out=outs[0], bias=_conv_bias(ins), post=post)


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
def _lower_pool(kind: str):
    def lower(node: Node, cx) -> list[Step]:
        xs, ys = cx.shape(node.inputs[0]), cx.shape(node.outputs[0])
        if len(xs) < 3:
            raise Unsupported("pooling needs rank >= 3")
        k = attr_ints(node, "kernel_shape")
        if k is None:
            raise Unsupported("kernel_shape is required")
        if len(k) != len(xs) - 2 or len(ys) != len(xs):
            raise Unsupported(f"kernel_shape has {len(k)} entries for {len(xs) - 2} spatial axes")
        if node.attr("storage_order", 0) != 0:
            raise Unsupported("storage_order=1 is not supported")
        if len(node.outputs) > 1 and cx.live(node.outputs[1]):
            raise Unsupported("MaxPool Indices output is not supported by the chip")
        strides, pads, dil = _spatial_attrs(node, cx, k)
        osz = list(ys[2:])
        _check_pool_window(node, xs, ys, k, strides, pads, dil)
        return [Step("pool", [node.inputs[0]], [node.outputs[0]],
                     {"kind": kind, "k": k, "strides": strides, "pads": pads, "dilations": dil, "osz": osz,
                      "count_include_pad": bool(node.attr("count_include_pad", 0))},
                     int(np.prod(ys)) * int(np.prod(k)))]
    return lower


def _check_pool_window(node: Node, xs, ys, k, strides, pads, dil) -> None:
    """Decline windows the emulator cannot run in bounded time and memory:
    non-positive sizes, more than :data:`MAX_POOL_TAPS` taps, a window that
    does not fit the padded input (NumPy and ONNX Runtime refuse those too),
    an output shape that is not the one the attributes give."""
    if any(v < 1 for v in [*k, *strides, *dil]) or any(p < 0 for p in pads):
        raise Unsupported(f"kernel_shape {k}, strides {strides} and dilations {dil} must be positive, "
                          f"pads {pads} non-negative")
    taps = math.prod(k)
    if taps > MAX_POOL_TAPS:
        raise Unsupported(f"kernel_shape {k} is a window of {taps} taps, over the chip's {MAX_POOL_TAPS}")
    sp = len(k)
    begin, end, out, _ = resolve_pads("NOTSET", xs[2:], k, strides, dil, pads, bool(node.attr("ceil_mode", 0)))
    misfit = window_misfit(xs[2:], k, dil, begin, end)
    if misfit is not None:
        raise Unsupported(misfit)
    if list(out) != list(ys[2:]):
        raise Unsupported(f"output shape {list(ys)} does not match the {sp}-d window's {list(xs[:2]) + list(out)}")


op("MaxPool", int8="generic")(_lower_pool("max"))
op("AveragePool", int8="generic")(_lower_pool("avg"))


@kernel("pool", exact=lambda a: a["kind"] == "max")
def _k_pool(ins, outs, a):
    store(outs[0], pool_nd(ins[0], a["kind"], a["k"], a["strides"], a["pads"], a["dilations"], a["osz"],
                           a["count_include_pad"], out=outs[0]), owned=True)


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
    A, B, out = f32(ins[0]), f32(ins[1]), outs[0]
    if a["transA"]:
        A = A.T
    if a["transB"]:
        B = B.T
    y = np.matmul(A, B, out=out if out.dtype == np.float32 else None)
    if a["alpha"] != 1.0:
        y *= a["alpha"]
    if len(ins) > 2 and ins[2] is not None:
        c = f32(ins[2])
        y += c if a["beta"] == 1.0 else a["beta"] * c
    store(out, y, owned=True)


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
    out = outs[0]
    direct = out.dtype == np.float32 and out.ndim >= 2 and ins[0].ndim >= 2 and ins[1].ndim >= 2
    store(out, np.matmul(f32(ins[0]), f32(ins[1]), out=out if direct else None), owned=True)


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
