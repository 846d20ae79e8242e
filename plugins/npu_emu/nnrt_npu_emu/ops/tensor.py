"""Data movement ops (reshape family, concat, split, slice, transpose, pad,
gather...) and compile-time constants (Constant, ConstantOfShape, Shape)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnrt_core.ir import Node
from nnrt_npu_emu.numerics import FP16_MAX, is_fp16_value
from nnrt_npu_emu.ops.common import Step, Unsupported, attr_ints, kernel, op, store

__all__ = ["fold_transpose"]


def _const_ints(node: Node, cx, i: int, what: str) -> list[int] | None:
    if len(node.inputs) <= i or node.inputs[i] is None:
        return None
    c = cx.const(node.inputs[i])
    if c is None:
        raise Unsupported(f"{node.op_type} {what} must be a compile-time constant")
    return [int(v) for v in c.reshape(-1)]


# ------------------------------------------------------------ reshape family
def _alias(node: Node, cx) -> list[Step]:
    return [Step("alias", [node.inputs[0]], [node.outputs[0]], {}, 0)]


def _no_instruction(node: Node, cx) -> int:
    """An alias re-labels a contiguous buffer: no device instruction, any rank."""
    return 0


op("Reshape", exact_dtypes="bool", const_inputs=(1,), int8="generic", device_rank=_no_instruction)(_alias)
op("Flatten", exact_dtypes="bool", int8="generic", device_rank=_no_instruction)(_alias)
op("Squeeze", exact_dtypes="bool", const_inputs=(1,), int8="generic", device_rank=_no_instruction)(_alias)
op("Unsqueeze", exact_dtypes="bool", const_inputs=(1,), int8="generic", device_rank=_no_instruction)(_alias)


# -------------------------------------------------------------------- concat
@op("Concat", exact_dtypes="bool")
def _lower_concat(node: Node, cx) -> list[Step]:
    rank = len(cx.shape(node.outputs[0]))
    ins = [v for v in node.inputs if v is not None and int(np.prod(cx.shape(v))) > 0]
    return [Step("concat", ins, [node.outputs[0]], {"axis": int(node.attr("axis")) % max(rank, 1)},
                 int(np.prod(cx.shape(node.outputs[0]))))]


@kernel("concat", exact=True)
def _k_concat(ins, outs, a):
    out = outs[0]
    axis = a["axis"]
    pos = 0
    for x in ins:  # loop over inputs (a handful), each a strided block copy
        n = x.shape[axis]
        idx = (slice(None),) * axis + (slice(pos, pos + n),)
        store(out[idx], x)
        pos += n


@op("Split", exact_dtypes="bool", const_inputs=(1,))
def _lower_split(node: Node, cx) -> list[Step]:
    xs = cx.shape(node.inputs[0])
    axis = int(node.attr("axis", 0)) % len(xs)
    sizes = [cx.shape(v)[axis] for v in node.outputs]
    outs = [v for v in node.outputs]
    return [Step("split", [node.inputs[0]], outs, {"axis": axis, "sizes": sizes}, int(np.prod(xs)))]


@kernel("split", exact=True)
def _k_split(ins, outs, a):
    x, axis, pos = ins[0], a["axis"], 0
    for out, n in zip(outs, a["sizes"]):
        store(out, x[(slice(None),) * axis + (slice(pos, pos + n),)])
        pos += n


# --------------------------------------------------------------------- slice
@op("Slice", exact_dtypes="bool", const_inputs=(1, 2, 3, 4))
def _lower_slice(node: Node, cx) -> list[Step]:
    xs = cx.shape(node.inputs[0])
    rank = len(xs)
    if (node.opset or 13) < 10:
        starts, ends = attr_ints(node, "starts"), attr_ints(node, "ends")
        axes, steps = attr_ints(node, "axes"), None
    else:
        starts, ends = _const_ints(node, cx, 1, "starts"), _const_ints(node, cx, 2, "ends")
        axes, steps = _const_ints(node, cx, 3, "axes"), _const_ints(node, cx, 4, "steps")
    if starts is None or ends is None:
        raise Unsupported("Slice needs starts and ends")
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    spec = [[0, d, 1] for d in xs]
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax %= rank
        d = xs[ax]
        if st == 0:
            raise Unsupported("Slice step 0")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        spec[ax] = [s, None if e < 0 else e, st]
    return [Step("slice", [node.inputs[0]], [node.outputs[0]], {"spec": spec},
                 int(np.prod(cx.shape(node.outputs[0]))))]


@kernel("slice", exact=True)
def _k_slice(ins, outs, a):
    store(outs[0], ins[0][tuple(slice(s, e, st) for s, e, st in a["spec"])])


# ----------------------------------------------------------------- transpose
def fold_transpose(shape: Sequence[int], perm: Sequence[int]) -> tuple[list[int], list[int]]:
    """The smallest-rank (shape, perm) moving the same elements as transposing
    a contiguous ``shape`` by ``perm``: size-1 axes are dropped and input axes
    that stay adjacent and in order in ``perm`` are merged into one.  A
    channel shuffle, ``[N, g, C/g, H, W]`` by ``[0, 2, 1, 3, 4]``, folds to
    ``[N, g, C/g, H*W]`` by ``[0, 2, 1, 3]`` (``[g, C/g, H*W]`` by
    ``[1, 0, 2]`` when N is 1)."""
    keep = [a for a in range(len(shape)) if shape[a] != 1]
    new_axis = {a: i for i, a in enumerate(keep)}
    dims = [int(shape[a]) for a in keep]
    runs: list[list[int]] = []  # runs of consecutive input axes, in output order
    for a in (new_axis[a] for a in perm if a in new_axis):
        if runs and runs[-1][-1] + 1 == a:
            runs[-1].append(a)
        else:
            runs.append([a])
    if not runs:
        return [1], [0]
    by_input = sorted(runs, key=lambda r: r[0])
    folded_shape = [int(np.prod([dims[a] for a in r], dtype=np.int64)) for r in by_input]
    return folded_shape, [by_input.index(r) for r in runs]


def _transpose_perm(node: Node, cx) -> list[int]:
    rank = len(cx.shape(node.inputs[0]))
    perm = attr_ints(node, "perm", list(range(rank))[::-1])
    if sorted(p % rank if rank else p for p in perm) != list(range(rank)) or len(perm) != rank:
        raise Unsupported(f"Transpose perm {perm} is not a permutation of the {rank} input axes")
    return [p % rank for p in perm]


def _transpose_rank(node: Node, cx) -> int:
    return len(fold_transpose(cx.shape(node.inputs[0]), _transpose_perm(node, cx))[1])


@op("Transpose", exact_dtypes="bool", int8="generic", device_rank=_transpose_rank)
def _lower_transpose(node: Node, cx) -> list[Step]:
    """One permute of the folded axes (rank <= the input's), whatever the input's rank."""
    shape, perm = fold_transpose(cx.shape(node.inputs[0]), _transpose_perm(node, cx))
    return [Step("transpose", [node.inputs[0]], [node.outputs[0]], {"perm": perm, "shape": shape},
                 int(np.prod(cx.shape(node.inputs[0]))))]


@kernel("transpose", exact=True)
def _k_transpose(ins, outs, a):
    """Permute ``ins[0]`` viewed as ``a["shape"]`` (the folded axes) into ``outs[0]``."""
    shape, perm = a["shape"], a["perm"]
    y = np.transpose(ins[0].reshape(shape), perm)
    out = outs[0]
    store(out.reshape(y.shape) if out.flags.c_contiguous else out, y)


# ----------------------------------------------------------------------- pad
@op("Pad", const_inputs=(1, 2, 3))
def _lower_pad(node: Node, cx) -> list[Step]:
    xs = cx.shape(node.inputs[0])
    rank = len(xs)
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"Pad mode={mode!r} is not supported")
    if (node.opset or 13) < 11:
        pads, value = attr_ints(node, "pads"), float(node.attr("value", 0.0))
    else:
        pads = _const_ints(node, cx, 1, "pads")
        value = 0.0
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            c = cx.const(node.inputs[2])
            if c is None:
                raise Unsupported("Pad constant_value must be a compile-time constant")
            value = float(c.reshape(-1)[0]) if c.size else 0.0
        axes = _const_ints(node, cx, 3, "axes")
        if axes is not None:
            full = [0] * (2 * rank)
            for i, ax in enumerate(axes):
                full[ax % rank], full[rank + ax % rank] = pads[i], pads[len(axes) + i]
            pads = full
    if pads is None or len(pads) != 2 * rank:
        raise Unsupported("Pad pads do not match the input rank")
    return [Step("pad", [node.inputs[0]], [node.outputs[0]], {"pads": pads, "mode": mode, "value": value},
                 int(np.prod(cx.shape(node.outputs[0]))))]


@kernel("pad", exact=lambda a: a["mode"] != "constant" or is_fp16_value(a["value"]))
def _k_pad(ins, outs, a):
    x = ins[0]
    rank = x.ndim
    pads = a["pads"]
    widths = [(max(pads[i], 0), max(pads[rank + i], 0)) for i in range(rank)]
    if a["mode"] == "constant":
        y = np.pad(x, widths, mode="constant", constant_values=a["value"])
    else:
        y = np.pad(x, widths, mode=a["mode"])
    idx = tuple(slice(-pads[i] if pads[i] < 0 else 0, y.shape[i] + pads[rank + i] if pads[rank + i] < 0 else None)
                for i in range(rank))
    store(outs[0], y[idx])


# -------------------------------------------------------------------- gather
@op("Gather", exact_dtypes="bool", const_inputs=(1,))
def _lower_gather(node: Node, cx) -> list[Step]:
    xs = cx.shape(node.inputs[0])
    axis = int(node.attr("axis", 0)) % len(xs)
    idx = cx.const(node.inputs[1])
    if idx is None:
        raise Unsupported("Gather indices must be a compile-time constant")
    idx = np.where(idx < 0, idx + xs[axis], idx)
    if idx.size and (idx.min() < 0 or idx.max() >= xs[axis]):
        raise Unsupported("Gather indices out of range")
    return [Step("gather", [node.inputs[0], idx.astype(np.int32)], [node.outputs[0]], {"axis": axis},
                 int(np.prod(cx.shape(node.outputs[0]))))]


@kernel("gather", exact=True)
def _k_gather(ins, outs, a):
    store(outs[0], np.take(ins[0], ins[1].astype(np.intp), axis=a["axis"]))


@kernel("gather_flat", exact=True)
def _k_gather_flat(ins, outs, a):
    store(outs[0], np.take(ins[0].reshape(-1), ins[1].astype(np.intp)))


@op("GatherND", exact_dtypes="bool", const_inputs=(1,))
def _lower_gather_nd(node: Node, cx) -> list[Step]:
    """GatherND with constant indices: the flat positions of the output's
    elements in the data are computed at compile time (one ``gather`` over
    the flattened data)."""
    xs = cx.shape(node.inputs[0])
    idx = cx.const(node.inputs[1])
    if idx is None:
        raise Unsupported("GatherND indices must be a compile-time constant")
    b = int(node.attr("batch_dims", 0))
    idx = np.asarray(idx, np.int64)
    k = idx.shape[-1] if idx.ndim else 0
    if (idx.ndim < 1 or not 0 <= b < idx.ndim or b + k > len(xs) or k < 1
            or tuple(idx.shape[:b]) != tuple(xs[:b])):
        raise Unsupported(f"GatherND indices of shape {list(idx.shape)} do not fit data {list(xs)} "
                          f"with batch_dims={b}")
    lim = np.asarray(xs[b:b + k], np.int64)
    if idx.size and ((idx < -lim).any() or (idx >= lim).any()):
        raise Unsupported("GatherND indices out of range")
    pos = np.arange(int(np.prod(xs)), dtype=np.int64).reshape(xs)
    batch = int(np.prod(xs[:b], dtype=np.int64))
    pos_b = pos.reshape((batch,) + tuple(xs[b:]))
    idx_b = np.where(idx < 0, idx + lim, idx).reshape((batch, -1, k))
    flat = np.stack([pos_b[i][tuple(idx_b[i, :, j] for j in range(k))] for i in range(batch)])
    flat = flat.reshape(cx.shape(node.outputs[0]))
    return [Step("gather_flat", [node.inputs[0], flat.reshape(-1).astype(np.int32)], [node.outputs[0]], {},
                 int(flat.size))]


@op("Tile", exact_dtypes="bool", const_inputs=(1,))
def _lower_tile(node: Node, cx) -> list[Step]:
    reps = _const_ints(node, cx, 1, "repeats")
    return [Step("tile", [node.inputs[0]], [node.outputs[0]], {"reps": reps},
                 int(np.prod(cx.shape(node.outputs[0]))))]


@kernel("tile", exact=True)
def _k_tile(ins, outs, a):
    store(outs[0], np.tile(ins[0], a["reps"]))


@op("Expand", exact_dtypes="bool", const_inputs=(1,))
def _lower_expand(node: Node, cx) -> list[Step]:
    return [Step("expand", [node.inputs[0]], [node.outputs[0]], {},
                 int(np.prod(cx.shape(node.outputs[0]))))]


@kernel("expand", exact=True)
def _k_expand(ins, outs, a):
    store(outs[0], np.broadcast_to(ins[0], outs[0].shape))


@op("Cast")
def _lower_cast(node: Node, cx) -> list[Step]:
    return [Step("cast", [node.inputs[0]], [node.outputs[0]], {}, int(np.prod(cx.shape(node.outputs[0]))))]


@kernel("cast")
def _k_cast(ins, outs, a):
    x = ins[0]
    if outs[0].dtype.kind in "iu" and x.dtype.kind == "f":
        x = np.trunc(x)
    elif outs[0].dtype.kind == "b":
        x = x != 0
    elif outs[0].dtype == np.float16 and x.dtype != np.float16:
        x = np.clip(x, -FP16_MAX, FP16_MAX)  # saturating, like every fp16 store of the chip
    np.copyto(outs[0], x.reshape(outs[0].shape), casting="unsafe")


# ------------------------------------------------------- compile-time values
@op("Constant", fold_only=True)
def _lower_constant(node: Node, cx) -> list[Step]:
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        v = node.attr(key, None)
        if v is not None:
            return [Step("literal", [np.asarray(v)], [node.outputs[0]], {}, 0)]
    raise Unsupported("Constant with a sparse or string value is not supported")


@op("ConstantOfShape", const_inputs=(0,), fold_only=True)
def _lower_cos(node: Node, cx) -> list[Step]:
    shape = _const_ints(node, cx, 0, "shape")
    v = node.attr("value", None)
    val = np.zeros(1, np.float32) if v is None else np.asarray(v).reshape(-1)
    return [Step("literal", [np.full(shape, val[0], dtype=val.dtype)], [node.outputs[0]], {}, 0)]


@op("Shape", fold_only=True)
def _lower_shape(node: Node, cx) -> list[Step]:
    shape = list(cx.shape(node.inputs[0]))
    start = int(node.attr("start", 0))
    end = node.attr("end", None)
    sl = shape[start:] if end is None else shape[start:int(end)]
    return [Step("literal", [np.asarray(sl, np.int64)], [node.outputs[0]], {}, 0)]


@op("Size", fold_only=True)
def _lower_size(node: Node, cx) -> list[Step]:
    return [Step("literal", [np.asarray(int(np.prod(cx.shape(node.inputs[0]))), np.int64)], [node.outputs[0]], {}, 0)]


@kernel("literal")
def _k_literal(ins, outs, a):
    np.copyto(outs[0], np.asarray(ins[0]).reshape(outs[0].shape), casting="unsafe")
