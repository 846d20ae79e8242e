"""Per-channel affine tails folded at compile time (:mod:`nnrt_numpy.fusion`):
into a constant-weight Conv / ConvTranspose head's weights and bias
(``W' = W * a``, ``B' = B * a + s``), or into an inference BatchNormalization
head's own affine."""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnrt_core.ir import Node
from nnrt_numpy.kernel import Kernel, NodeInfo

__all__ = ["bn_affine", "folds", "compose_channel_affine", "fold_into_conv"]


def bn_affine(node: Node, kernel: Kernel) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, s)`` with BN(x) = x * a + s per channel, for an inference-mode BN with constants."""
    if len(node.outputs) != 1 or node.attributes.get("training_mode") and node.attributes["training_mode"].value:
        return None
    if "spatial" in node.attributes and not node.attributes["spatial"].value:
        return None
    affine = getattr(kernel, "_affine", None)
    if affine is None:
        return None
    a, s = affine
    if a.ndim != 1 or s.ndim != 1 or a.shape != s.shape:
        return None
    x = node.inputs[0]
    if x is None or x.shape is None or len(x.shape) < 2 or x.shape[1] != a.shape[0]:
        return None
    return a, s


def folds(tail: tuple) -> bool:
    """Whether a tail is a per-channel affine, Mul or Add (:func:`compose_channel_affine` folds it)."""
    return tail[0] == "affine" or (tail[0] in ("mul", "add") and tail[2] == "channel")


def compose_channel_affine(tails: list, a: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Fold the leading per-channel affine / Mul / Add tails into ``y*a + s``;
    returns the new (a, s) and how many tails were folded."""
    k = 0
    while k < len(tails) and folds(tails[k]):
        t = tails[k]
        if t[0] == "affine":
            a, s = a * t[1], s * t[1] + t[2]
        elif t[0] == "mul":
            a, s = a * t[1], s * t[1]
        else:
            s = s + t[1]
        k += 1
    return a, s, k


def fold_into_conv(head: Node, head_kernel: Kernel, tails: list[tuple], yshape: tuple, ydt: np.dtype,
                   make_kernel: Callable[[NodeInfo], Kernel]
                   ) -> tuple[Kernel, dict[int, np.ndarray], int] | None:
    """``(head kernel with folded weights, {input index: new constant}, tails folded)``
    when ``head`` is a constant-weight Conv / ConvTranspose whose leading tails are
    per-channel affine; ``None`` otherwise (the chain then has 3 head inputs)."""
    if head.op_type not in ("Conv", "ConvTranspose") or len(yshape) < 3 or not isinstance(yshape[1], int):
        return None
    w = head.inputs[1].const if len(head.inputs) > 1 and head.inputs[1] is not None else None
    bv = head.inputs[2] if len(head.inputs) > 2 else None
    b = bv.const if bv is not None and bv.name else None
    has_b = bv is not None and bool(bv.name)
    if w is None or w.dtype != ydt or (has_b and (b is None or b.dtype != ydt)) or not folds(tails[0]):
        return None  # (a Relu or Clip first: nothing to fold, no vectors to make)
    a, s, k = compose_channel_affine(tails, np.ones(yshape[1], np.float64), np.zeros(yshape[1], np.float64))
    if not k:
        return None
    group = int(head.attributes["group"].value) if "group" in head.attributes else 1
    w64 = w.astype(np.float64)
    if head.op_type == "Conv":
        wf = w64 * a.reshape((-1,) + (1,) * (w.ndim - 1))
    else:  # ConvTranspose: weight (C_in, C_out / group, *k), output channel = g * (C_out/group) + j
        cpg = w.shape[1]
        wg = w64.reshape((group, w.shape[0] // group, cpg) + w.shape[2:])
        wf = (wg * a.reshape((group, 1, cpg) + (1,) * (w.ndim - 2))).reshape(w.shape)
    bf = (b.astype(np.float64) * a if b is not None else 0) + s
    wf = wf.astype(ydt)
    bf = np.ascontiguousarray(np.broadcast_to(bf, (yshape[1],)), dtype=ydt)
    info = head_kernel.node
    consts = list(info.const_inputs) + [None] * (3 - len(info.const_inputs))
    present = list(info.input_present) + [False] * (3 - len(info.input_present))
    dts = list(info.input_dtypes) + [None] * (3 - len(info.input_dtypes))
    shapes = list(info.input_shapes) + [None] * (3 - len(info.input_shapes))
    consts[1], consts[2], present[2], dts[2], shapes[2] = wf, bf, True, ydt, (yshape[1],)
    info = info.replace(const_inputs=tuple(consts), input_present=tuple(present), input_dtypes=tuple(dts),
                        input_shapes=tuple(shapes), num_inputs=max(info.num_inputs, 3))
    return make_kernel(info), {1: wf, 2: bf}, k
