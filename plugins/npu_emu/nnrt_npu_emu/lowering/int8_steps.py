"""Lowering of one DQ -> op [-> Relu/Clip] -> Q group to its int8 instruction:
integer conv/gemm (int32 accumulation), integer max pooling, rescaled linear
ops (concat, add, average pooling, data movement), pure int8 aliases, and the
dequantize -> float -> requantize form for the rest (softmax, sigmoid...)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnrt_core.ir import Node, Value
from nnrt_npu_emu.lowering.analysis import Analysis, QGroup
from nnrt_npu_emu.ops import OPS, Step, Unsupported
from nnrt_npu_emu.ops.int8 import F32_EXACT, RAW_KERNELS, SPLIT, k_chunks
from nnrt_npu_emu.ops.quant import qparams

__all__ = ["OutQuant", "Int8StepBuilder", "HOMOGENEOUS"]

#: kernels (and their ``fn``/``kind``) with f(c * x) = c * f(x) for c > 0: they run on rescaled integers
HOMOGENEOUS: dict[str, frozenset[str] | None] = {
    "concat": None, "transpose": None, "slice": None, "split": None, "pad": None,
    "unary": frozenset({"copy"}), "nary": frozenset({"add", "sub", "mean", "max", "min"}),
    "pool": frozenset({"avg", "max"}), "reduce": frozenset({"mean", "sum", "max", "min"}),
}
_INT32_MAX = 2.0 ** 31 - 1


@dataclass
class OutQuant:
    """The quantization of one group output (its first QuantizeLinear)."""

    value: Value  #: the Q node's output (int8/uint8)
    scale: np.ndarray
    zero_point: np.ndarray
    dtype: np.dtype

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1 and self.zero_point.size == 1

    def clamp(self, act: dict[str, Any] | None) -> tuple[int, int]:
        """Integer saturation bounds: the type's range narrowed by a fused Relu/Clip
        (quantization is monotonic, so clamping before or after it agrees)."""
        info = np.iinfo(self.dtype)
        lo, hi = int(info.min), int(info.max)
        s, z = float(self.scale.reshape(-1)[0]), int(self.zero_point.reshape(-1)[0])
        if act:
            if act.get("min") is not None:
                lo = max(lo, min(hi, int(np.rint(np.float32(act["min"]) / np.float32(s))) + z))
            if act.get("max") is not None:
                hi = min(hi, max(lo, int(np.rint(np.float32(act["max"]) / np.float32(s))) + z))
        return lo, hi

    def quant_attrs(self, act: dict[str, Any] | None) -> dict[str, Any]:
        lo, hi = self.clamp(act)
        return {"yz": int(self.zero_point.reshape(-1)[0]), "lo": lo, "hi": hi}


class Int8StepBuilder:
    """Chooses the int8 form of each group of one analysed graph."""

    def __init__(self, an: Analysis) -> None:
        self.an = an

    # -- facts ----------------------------------------------------------------
    def dq_parts(self, v: Value) -> tuple[Any, np.ndarray, np.ndarray]:
        """(quantized source value or constant, scale, zero point) of a dequantized value."""
        an = self.an
        dq = v.producer
        s, z = qparams(dq, an, len(an.shape(dq.inputs[0])))
        src = dq.inputs[0]
        return (an.const(src) if an.is_const(src) else src), s, z

    def out_quant(self, q: Node) -> OutQuant:
        s, z = qparams(q, self.an, len(self.an.shape(q.inputs[0])))
        return OutQuant(q.outputs[0], s, z, self.an.dtype(q.outputs[0]))

    def act_bounds(self, grp: QGroup) -> dict[str, Any] | None:
        """The fused activation's clamp (``min``/``max``), or ``None`` without one."""
        if grp.act is None:
            return None
        if grp.act.op_type != "Clip":
            return {"min": 0.0, "max": None}
        b = OPS["Clip"].lower(grp.act, self.an)[0].attrs
        return {"min": b.get("min"), "max": b.get("max")}

    def _per_tensor_input(self, x: Any) -> bool:
        if not self.an.is_dequantized(x):
            return False
        src, s, z = self.dq_parts(x)
        return not isinstance(src, np.ndarray) and s.size == 1 and z.size == 1

    # -- forms ----------------------------------------------------------------
    def step(self, grp: QGroup, st: Step, outs: list[OutQuant]) -> Step:
        """The int8 step of group ``grp`` whose float form is ``st``."""
        n = grp.head
        act = self.act_bounds(grp)
        if st.kernel == "alias":
            alias = self._alias(st, outs)
            if alias is not None:
                return alias
            st = Step("unary", st.ins, st.outs, {"fn": "copy"}, st.macs)
        if all(o.per_tensor for o in outs):
            if n.op_type == "Conv" and self.int_path(n, st):
                return self._conv(st, outs[0], act)
            if n.op_type in ("Gemm", "MatMul") and self.int_path(n, st):
                return self._gemm(st, outs[0], act)
            if st.kernel == "pool" and st.attrs["kind"] == "max" and self._per_tensor_input(st.ins[0]):
                return self._maxpool(st, outs[0], act)
            if self._homogeneous(st) and len({(float(o.scale), int(o.zero_point)) for o in outs}) == 1:
                return self._linear(st, outs, act)
        return self._generic(st, outs, act)

    def _alias(self, st: Step, outs: list[OutQuant]) -> Step | None:
        """A reshape of int8 data when input and output quantization agree, else ``None``."""
        x = st.ins[0]
        if len(outs) != 1 or not self.an.is_dequantized(x):
            return None
        src, s, z = self.dq_parts(x)
        o = outs[0]
        if not isinstance(src, np.ndarray) and np.array_equal(s, o.scale) and np.array_equal(z, o.zero_point) \
                and self.an.dtype(src) == o.dtype:
            return Step("alias", [src], [o.value], {}, 0)
        return None

    def _homogeneous(self, st: Step) -> bool:
        """True when ``st`` commutes with a positive rescale and every input is per-tensor int8 or float constant."""
        if st.kernel not in HOMOGENEOUS:
            return False
        fns = HOMOGENEOUS[st.kernel]
        sub = st.attrs.get("fn", st.attrs.get("kind"))
        if fns is not None and sub not in fns:
            return False
        if st.kernel == "pad" and st.attrs.get("mode") != "constant":
            return st.attrs.get("mode") in ("edge", "reflect")
        return all(self._per_tensor_input(x) or self._float_const(x) for x in st.ins if x is not None)

    def _float_const(self, x: Any) -> bool:
        c = x if isinstance(x, np.ndarray) else self.an.const(x)
        return c is not None and c.dtype.kind == "f"

    def _linear(self, st: Step, outs: list[OutQuant], act: dict[str, Any] | None) -> Step:
        """A ``qlinear`` step: integers rescaled to the output scale, the float
        kernel, rounding and saturation; ``raw`` when every scale agrees."""
        o = outs[0]
        ys, yz = float(o.scale), int(o.zero_point)
        ins: list[Any] = []
        rescale: list[tuple[int | None, float]] = []
        raw = st.kernel in RAW_KERNELS and st.attrs.get("fn", "copy") == "copy" and act is None
        for x in st.ins:
            if x is not None and self._per_tensor_input(x):
                src, s, z = self.dq_parts(x)
                ins.append(src)
                rescale.append((int(z), float(np.float32(s) / np.float32(ys))))
                raw = raw and float(s) == ys and int(z) == yz and self.an.dtype(src) == o.dtype
            else:
                c = x if isinstance(x, np.ndarray) else self.an.const(x)
                ins.append((c.astype(np.float64) / ys).astype(np.float32))
                rescale.append((None, 1.0))
                raw = False
        inner_attrs = dict(st.attrs)
        if st.kernel == "pad" and st.attrs.get("mode") == "constant":
            inner_attrs["value"] = float(st.attrs.get("value", 0.0)) / ys
            raw = False
        attrs = {"inner": st.kernel, "inner_attrs": inner_attrs, "rescale": rescale, "raw": raw,
                 **o.quant_attrs(act)}
        return Step("qlinear", ins, [q.value for q in outs], attrs, st.macs)

    def _maxpool(self, st: Step, o: OutQuant, act: dict[str, Any] | None) -> Step:
        """A ``qmaxpool`` step: max over the integers, requantized when the scales differ."""
        src, s, z = self.dq_parts(st.ins[0])
        same = float(s) == float(o.scale) and int(z) == int(o.zero_point) and self.an.dtype(src) == o.dtype
        attrs = {k: st.attrs[k] for k in ("k", "strides", "pads", "dilations", "osz")}
        attrs.update(o.quant_attrs(act), xz=int(z),
                     mult=None if same else float(np.float32(s) / np.float32(o.scale)))
        return Step("qmaxpool", [src], [o.value], attrs, st.macs)

    def _generic(self, st: Step, outs: list[OutQuant], act: dict[str, Any] | None) -> Step:
        """A ``qgeneric`` step: dequantize the int8 inputs, run ``st``'s kernel in fp32, requantize."""
        an = self.an
        ins: list[Any] = []
        qin: list[bool | None] = []
        for x in st.ins:
            if x is None:
                qin.append(None)
            elif not isinstance(x, np.ndarray) and an.is_dequantized(x):
                src, s, z = self.dq_parts(x)
                qin.append(True)
                ins += [src, s, z]
            else:
                c = x if isinstance(x, np.ndarray) else an.const(x)
                if c is None:
                    raise Unsupported(f"input {x.name!r} is neither dequantized int8 data nor a constant")
                qin.append(False)
                ins.append(c.astype(np.float32) if c.dtype.kind == "f" else c)
        for o in outs:
            ins += [o.scale, o.zero_point]
        return Step("qgeneric", ins, [o.value for o in outs],
                    {"inner": st.kernel, "inner_attrs": st.attrs, "qin": qin, "act": act}, st.macs)

    # -- integer conv / gemm ----------------------------------------------------
    def int_path(self, n: Node, st: Step) -> bool:
        """True when a Conv/Gemm/MatMul group can accumulate in int32 (per-tensor
        activations, constant weights per tensor or per output channel, constant bias)."""
        an = self.an
        if not self._per_tensor_input(st.ins[0]) or not an.is_dequantized(st.ins[1]):
            return False
        if not isinstance(self.dq_parts(st.ins[1])[0], np.ndarray):
            return False
        if n.op_type == "Gemm" and (st.attrs.get("beta", 1.0) != 1.0 or st.attrs.get("transA")):
            return False
        if n.op_type != "Conv" and len(an.shape(st.ins[1])) != 2:
            return False
        bias = st.ins[2] if len(st.ins) > 2 else None
        if bias is not None and (not an.is_const(bias) or n.op_type != "Conv" and
                                 an.const(bias).size not in (1, an.shape(st.outs[0])[-1])):
            return False
        w_dq = st.ins[1].producer
        rank = len(an.shape(w_dq.inputs[0]))
        s = an.const(w_dq.inputs[1])
        if s.size > 1:  # per-channel weights: along output channels only
            out_axis = 0 if n.op_type == "Conv" or st.attrs.get("transB") else 1
            return int(w_dq.attr("axis", 1)) % rank == out_axis
        return True

    def _weights(self, st: Step, channels: int, out_axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(int8 weights, scale per output channel, zero point per output channel)."""
        wq, ws, wz = self.dq_parts(st.ins[1])
        ws = np.broadcast_to(ws.reshape(-1), (channels,)) if ws.size == 1 else ws.reshape(-1)
        wz = np.broadcast_to(wz.reshape(-1), (channels,)) if wz.size == 1 else wz.reshape(-1)
        return wq, ws.astype(np.float64), wz.astype(np.int64)

    def _bias(self, st: Step, xs: float, ws: np.ndarray) -> np.ndarray | None:
        """The bias in accumulator units (int32): round(float bias / (input scale * weight scale))."""
        if len(st.ins) < 3 or st.ins[2] is None:
            return None
        bf = np.asarray(self.an.const(st.ins[2]), np.float64).reshape(-1)
        q = np.rint(np.broadcast_to(bf, ws.shape) / (xs * ws))
        return np.clip(q, -_INT32_MAX - 1, _INT32_MAX).astype(np.int32)

    @staticmethod
    def _exactness(w_abs_k: np.ndarray, x_max: float, bias: np.ndarray | None) -> dict[str, Any]:
        """How the GEMM stays exact (``f32``, ``split``: ranges of K when few
        suffice, ``k_chunks``, else split weights; or ``f64``), and whether the
        int32 accumulator can overflow (then it saturates).
        ``w_abs_k``: the centered integer weights' magnitudes, (channels, K)."""
        b = np.abs(bias.astype(np.float64)) if bias is not None else 0.0
        total = float(np.max(w_abs_k.sum(axis=1) * x_max + b, initial=0.0))
        high = np.abs(np.rint(w_abs_k / SPLIT))
        worst_part = max(float(high.sum(axis=1).max(initial=0.0)),
                         float(np.abs(w_abs_k - SPLIT * high).sum(axis=1).max(initial=0.0))) * x_max
        mode = "f32" if total < F32_EXACT else "split" if worst_part < F32_EXACT else "f64"
        out: dict[str, Any] = {"gemm": mode, "saturate_acc": total > _INT32_MAX}
        chunks = k_chunks(w_abs_k, x_max) if mode == "split" else None
        if chunks is not None:  # one GEMM's work in exact ranges of K instead of two GEMMs on split weights
            out["k_chunks"] = chunks
        return out

    def _conv(self, st: Step, o: OutQuant, act: dict[str, Any] | None) -> Step:
        """An integer-accumulating ``qconv`` step (int32 bias, per-channel multiplier)."""
        xq, xs, xz = self.dq_parts(st.ins[0])
        M = self.an.shape(st.ins[1])[0]
        wq, ws, wz = self._weights(st, M, 0)
        xs, xz = float(xs), int(xz)
        bias = self._bias(st, xs, ws)
        info = np.iinfo(self.an.dtype(xq))
        w_abs = np.abs(wq.reshape(M, -1).astype(np.int64) - wz[:, None])
        w_abs_k = w_abs.reshape(M, -1)  # grouped: each output channel sums its own group's K
        attrs = {k: st.attrs[k] for k in ("strides", "pads", "dilations", "group")}
        attrs.update(self._exactness(w_abs_k, max(xz - info.min, info.max - xz), bias), xz=xz,
                     wz=[int(v) for v in wz] if wz.any() else None, wz_nonzero=bool(wz.any()), **o.quant_attrs(act))
        mult = (xs * ws / float(o.scale)).astype(np.float32)
        return Step("qconv", [xq, wq, bias, mult], [o.value], attrs, st.macs)

    def _gemm(self, st: Step, o: OutQuant, act: dict[str, Any] | None) -> Step:
        """An integer-accumulating ``qgemm`` step (Gemm without transA, or MatMul by a 2-D constant)."""
        xq, xs, xz = self.dq_parts(st.ins[0])
        trans_b = int(st.attrs.get("transB", 0))
        N = self.an.shape(st.outs[0])[-1]
        wq, ws, wz = self._weights(st, N, 0 if trans_b else 1)
        xs, xz = float(xs), int(xz)
        bias = self._bias(st, xs, ws)
        info = np.iinfo(self.an.dtype(xq))
        wk = wq.astype(np.int64)
        w_abs_k = np.abs((wk if trans_b else wk.T) - wz[:, None])  # (N, K)
        attrs = {"transB": trans_b, "az": xz, "wz": [int(v) for v in wz] if wz.any() else None,
                 "wz_nonzero": bool(wz.any()), **o.quant_attrs(act),
                 **self._exactness(w_abs_k, max(xz - info.min, info.max - xz), bias)}
        mult = (xs * ws * float(st.attrs.get("alpha", 1.0)) / float(o.scale)).astype(np.float32)
        return Step("qgemm", [xq, wq, bias, mult], [o.value], attrs, st.macs)
