"""Elementwise arithmetic, activations and reductions."""
from __future__ import annotations

import numpy as np

from nnrt_core.ir import Node
from nnrt_npu_emu.numerics import erf, f32, is_fp16_value
from nnrt_npu_emu.ops.common import Step, Unsupported, attr_ints, kernel, op, store

__all__: list[str] = []


def _num(x: np.ndarray) -> np.ndarray:
    """fp32 for float operands (fp16 storage widens), native for integers (folding)."""
    return f32(x) if x.dtype.kind == "f" else x


# ------------------------------------------------------------------ binary
_BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow",
    "Max": "max", "Min": "min", "Sum": "add", "Mean": "mean", "PRelu": "prelu",
}


def _bin(fn: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if fn == "add":
        return a + b
    if fn == "sub":
        return a - b
    if fn == "mul":
        return a * b
    if fn == "div":
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":
            return np.trunc(a / b).astype(np.result_type(a, b))
        return a / b
    if fn == "pow":
        return np.power(a.astype(np.float64) if a.dtype.kind in "iu" else a, b)
    if fn == "max":
        return np.maximum(a, b)
    if fn == "min":
        return np.minimum(a, b)
    if fn == "prelu":
        return np.where(a < 0, a * b, a)
    raise ValueError(f"unknown binary function {fn!r}")


def _lower_binary(name: str):
    fn = _BINARY[name]

    def lower(node: Node, cx) -> list[Step]:
        ins = [v for v in node.inputs if v is not None]
        if not ins:
            raise Unsupported(f"{name} with no inputs")
        n = int(np.prod(cx.shape(node.outputs[0])))
        if len(ins) == 1:
            return [Step("unary", ins, [node.outputs[0]], {"fn": "copy"}, n)]
        return [Step("nary", ins, [node.outputs[0]], {"fn": fn}, n * (len(ins) - 1))]
    return lower


for _name in _BINARY:
    op(_name, int8="generic")(_lower_binary(_name))


#: n-ary functions accumulated straight into an fp32 output, in the same order (no temporaries)
_NARY_INTO = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@kernel("nary", exact=lambda a: a["fn"] in ("max", "min"))
def _k_nary(ins, outs, a):
    fn, out = a["fn"], outs[0]
    ufunc = _NARY_INTO.get(fn)
    if ufunc is not None and out.dtype == np.float32 and all(
            x.dtype == np.float32 and x.shape == out.shape for x in ins):
        ufunc(ins[0], ins[1], out=out)
        for x in ins[2:]:
            ufunc(out, x, out=out)
        return
    acc = _num(ins[0])
    for x in ins[1:]:
        acc = _bin("add" if fn == "mean" else fn, acc, _num(x))
    if fn == "mean":
        acc = acc / len(ins)
    store(outs[0], acc)


# ------------------------------------------------------------------- unary
_UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "HardSigmoid": "hardsigmoid",
    "HardSwish": "hardswish", "LeakyRelu": "leakyrelu", "Elu": "elu", "Gelu": "gelu", "Abs": "abs",
    "Neg": "neg", "Sqrt": "sqrt", "Exp": "exp", "Log": "log", "Reciprocal": "reciprocal", "Erf": "erf",
    "Softplus": "softplus", "Clip": "clip", "Identity": "copy", "Dropout": "copy", "Floor": "floor",
    "Ceil": "ceil",
}


def _unary(fn: str, x: np.ndarray, a: dict) -> np.ndarray:
    if fn == "copy":
        return x
    if fn == "relu":
        return np.maximum(x, 0)
    if fn == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if fn == "tanh":
        return np.tanh(x)
    if fn == "hardsigmoid":
        return np.clip(a["alpha"] * x + a["beta"], 0.0, 1.0)
    if fn == "hardswish":
        return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)
    if fn == "leakyrelu":
        return np.where(x < 0, a["alpha"] * x, x)
    if fn == "elu":
        return np.where(x < 0, a["alpha"] * (np.exp(np.minimum(x, 0)) - 1.0), x)
    if fn == "gelu":
        if a.get("approximate") == "tanh":
            return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
    if fn == "abs":
        return np.abs(x)
    if fn == "neg":
        return -x
    if fn == "sqrt":
        return np.sqrt(x)
    if fn == "exp":
        return np.exp(x)
    if fn == "log":
        return np.log(x)
    if fn == "reciprocal":
        return 1.0 / x
    if fn == "erf":
        return erf(x)
    if fn == "softplus":
        return np.logaddexp(x, 0.0)
    if fn == "floor":
        return np.floor(x)
    if fn == "ceil":
        return np.ceil(x)
    if fn == "clip":
        lo = a.get("min")
        hi = a.get("max")
        y = x
        if lo is not None:
            y = np.maximum(y, lo)
        if hi is not None:
            y = np.minimum(y, hi)
        return y
    raise ValueError(f"unknown unary function {fn!r}")


def _clip_bounds(node: Node, cx) -> dict:
    if (node.opset or 13) < 11:
        return {"min": node.attr("min", None), "max": node.attr("max", None)}
    out: dict = {"min": None, "max": None}
    for i, key in ((1, "min"), (2, "max")):
        if len(node.inputs) > i and node.inputs[i] is not None:
            c = cx.const(node.inputs[i])
            if c is None:
                raise Unsupported(f"Clip {key} must be a compile-time constant")
            out[key] = float(c.reshape(-1)[0]) if c.dtype.kind == "f" else int(c.reshape(-1)[0])
    return out


def _lower_unary(name: str):
    fn = _UNARY[name]

    def lower(node: Node, cx) -> list[Step]:
        if name == "Dropout" and len(node.outputs) > 1 and cx.live(node.outputs[1]):
            raise Unsupported("Dropout mask output is not supported")
        if name == "Dropout" and len(node.inputs) > 2 and node.inputs[2] is not None:
            t = cx.const(node.inputs[2])
            if t is None or bool(t.reshape(-1)[0]):
                raise Unsupported("Dropout in training mode is not supported")
        if name in ("Identity", "Dropout"):
            return [Step("alias", [node.inputs[0]], [node.outputs[0]], {}, 0)]
        attrs: dict = {"fn": fn}
        if fn == "hardsigmoid":
            attrs.update(alpha=float(node.attr("alpha", 0.2)), beta=float(node.attr("beta", 0.5)))
        elif fn == "leakyrelu":
            attrs["alpha"] = float(node.attr("alpha", 0.01))
        elif fn == "elu":
            attrs["alpha"] = float(node.attr("alpha", 1.0))
        elif fn == "gelu":
            approx = node.attr("approximate", "none")
            if approx not in ("none", "tanh"):
                raise Unsupported(f"Gelu approximate={approx!r} is not supported")
            attrs["approximate"] = approx
        elif fn == "clip":
            attrs.update(_clip_bounds(node, cx))
        n = int(np.prod(cx.shape(node.outputs[0])))
        return [Step("unary", [node.inputs[0]], [node.outputs[0]], attrs, n)]
    return lower


for _name in _UNARY:
    op(_name, int8="generic", const_inputs=(1, 2) if _name == "Clip" else ((2,) if _name == "Dropout" else ()))(
        _lower_unary(_name))


def _clip_into(x: np.ndarray, a: dict, out: np.ndarray) -> None:
    lo, hi = a.get("min"), a.get("max")
    if lo is not None and hi is not None:
        np.clip(x, lo, hi, out=out)
    elif lo is not None:
        np.maximum(x, lo, out=out)
    elif hi is not None:
        np.minimum(x, hi, out=out)
    else:
        np.copyto(out, x)


#: unary functions computed straight into an fp32 output (no temporaries)
_INTO = {
    "relu": lambda x, a, out: np.maximum(x, 0.0, out=out),
    "neg": lambda x, a, out: np.negative(x, out=out),
    "abs": lambda x, a, out: np.absolute(x, out=out),
    "copy": lambda x, a, out: np.copyto(out, x),
    "clip": _clip_into,
}


def _exact_unary(a: dict) -> bool:
    """relu/neg/abs/copy select or negate input values; clip also its bounds (exact when fp16 values)."""
    if a["fn"] == "clip":
        return is_fp16_value(a.get("min")) and is_fp16_value(a.get("max"))
    return a["fn"] in ("relu", "neg", "abs", "copy")


@kernel("unary", exact=_exact_unary)
def _k_unary(ins, outs, a):
    x, out, fn = ins[0], outs[0], a["fn"]
    if fn in _INTO and x.dtype == out.dtype == np.float32 and x.shape == out.shape:
        _INTO[fn](x, a, out)
        return
    y = _unary(fn, _num(x), a)
    store(out, y, owned=y is not x)


# -------------------------------------------------------------- reductions
_REDUCE = {"ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceSum": "sum"}


def _lower_reduce(name: str):
    fn = _REDUCE[name]

    def lower(node: Node, cx) -> list[Step]:
        xs = cx.shape(node.inputs[0])
        rank = len(xs)
        axes_in_input = name == "ReduceSum" and (node.opset or 13) >= 13 or (node.opset or 18) >= 18
        if axes_in_input:
            axes = None
            if len(node.inputs) > 1 and node.inputs[1] is not None:
                c = cx.const(node.inputs[1])
                if c is None:
                    raise Unsupported(f"{name} axes must be a compile-time constant")
                axes = [int(v) for v in c.reshape(-1)]
        else:
            axes = attr_ints(node, "axes")
        if not axes:
            if node.attr("noop_with_empty_axes", 0):
                return [Step("alias", [node.inputs[0]], [node.outputs[0]], {}, 0)]
            axes = list(range(rank))
        axes = sorted({a % rank for a in axes}) if rank else []
        return [Step("reduce", [node.inputs[0]], [node.outputs[0]],
                     {"fn": fn, "axes": axes, "keepdims": bool(node.attr("keepdims", 1))},
                     max(int(np.prod(xs)), 1))]
    return lower


for _name in _REDUCE:
    op(_name, const_inputs=(1,))(_lower_reduce(_name))


@kernel("reduce", exact=lambda a: a["fn"] in ("max", "min"))
def _k_reduce(ins, outs, a):
    x = _num(ins[0])
    axes = tuple(a["axes"])
    fn = a["fn"]
    if fn == "mean":
        y = x.mean(axis=axes, keepdims=a["keepdims"], dtype=np.float32)
    elif fn == "sum":
        y = x.sum(axis=axes, keepdims=a["keepdims"])
    elif fn == "max":
        y = x.max(axis=axes, keepdims=a["keepdims"])
    else:
        y = x.min(axis=axes, keepdims=a["keepdims"])
    store(outs[0], y)
