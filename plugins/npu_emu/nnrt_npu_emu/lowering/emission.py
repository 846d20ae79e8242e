"""Lowering stage 4, emission: device instructions, the weights blob and
lifetime-planned workspace offsets of a :class:`Program`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnrt_core.errors import CompileError
from nnrt_core.ir import Graph, Value
from nnrt_npu_emu.cost import estimate
from nnrt_npu_emu.lowering.analysis import QUANT_DTYPES, Analysis
from nnrt_npu_emu.lowering.selection import Selection
from nnrt_npu_emu.memory import Buffer, align, plan_offsets
from nnrt_npu_emu.numerics import FP16_MAX, STORAGE, fp16_unsafe_value
from nnrt_npu_emu.ops import Step
from nnrt_npu_emu.program import Instr, Operand, Program, TensorSpec

__all__ = ["Lowered", "ProgramEmitter", "storage_dtype"]


@dataclass
class Lowered:
    """A lowered partition: its device program and the weights blob its constants live in."""

    program: Program
    weights: bytes


def storage_dtype(an: Analysis, v: Value) -> np.dtype:
    """The element type the chip holds ``v`` in (floats in the compute precision)."""
    dt = an.dtype(v)
    if dt in QUANT_DTYPES or dt == np.int32 or dt == np.int64 or dt == np.bool_:
        return dt
    if dt.kind == "f":
        return STORAGE[an.fprec] if an.fprec else np.dtype(np.float32)
    raise CompileError(f"value {v.name!r} has dtype {dt}, which the chip cannot hold")


class ProgramEmitter:
    """Turns the selected steps of one graph into a validated :class:`Program`.

    Tracks where each value lives (``loc``), the constants packed into the
    weights blob, and each workspace buffer's definition and last use."""

    def __init__(self, graph: Graph, an: Analysis, selection: Selection) -> None:
        self.graph, self.an, self.sel = graph, an, selection
        self.profile = an.profile
        self.fdt = an.fprec or "fp32"
        self.inputs = [TensorSpec(v.name, str(an.dtype(v)), list(an.shape(v))) for v in graph.inputs]
        self.outputs = [TensorSpec(v.name, str(an.dtype(v)), list(an.shape(v))) for v in graph.outputs]
        self.loc: dict[int, Operand] = {}
        self.instrs: list[Instr] = []
        self.consts: list[tuple[np.ndarray, int]] = []
        self.const_size = 0
        self.const_ids: dict[int, Operand] = {}
        self.ws_vals: dict[int, tuple[Value, int]] = {}  # value id -> (value, def index)
        self.root: dict[int, int] = {}  # alias value id -> root value id
        self.last: dict[int, int] = {}  # root value id -> index of its last use

    def emit(self) -> Lowered:
        """Emit all instructions, plan the workspace, check the device memory; raises :class:`CompileError`."""
        self.emit_inputs()
        for st in self.sel.steps:
            self.emit_step(st)
        self.emit_outputs()
        ws_size = self.plan_workspace()
        for ins in self.instrs:
            estimate(ins, self.profile)
        return self.finish(ws_size)

    # -- operands ---------------------------------------------------------
    def add_const(self, arr: np.ndarray, keep: bool) -> Operand:
        """The operand of a constant in the weights blob (floats stored in the
        compute precision unless ``keep``: int8 steps read fp32 parameters)."""
        key = id(arr)
        if key in self.const_ids:
            return self.const_ids[key]
        a = np.asarray(arr)
        if a.dtype.kind == "f":
            dt = np.dtype(np.float32) if keep else STORAGE[self.fdt]
            if dt == np.float16 and a.dtype != np.float16:  # saturate like the chip's stores (e.g. -3.4e38 masks)
                bad = fp16_unsafe_value(a)  # capability declines such nodes; a constant made while lowering could slip
                if bad is not None:
                    raise CompileError(f"a constant holds {bad:.4g}, beyond fp16 (+-{FP16_MAX:g}): the chip would "
                                       "saturate it")
                a = np.clip(a, -FP16_MAX, FP16_MAX)
            a = a.astype(dt)
        elif a.dtype == np.int64:
            if a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
                raise CompileError("an int64 constant does not fit the chip's int32")
            a = a.astype(np.int32)
        elif a.dtype == np.bool_:
            a = a.astype(np.uint8)
        a = np.ascontiguousarray(a)
        op = Operand("const", self.const_size, str(a.dtype), list(a.shape))
        self.consts.append((a, self.const_size))
        self.const_size += align(a.nbytes)
        self.const_ids[key] = op
        return op

    def new_ws(self, v: Value, idx: int, dtype: np.dtype | None = None) -> Operand:
        """A workspace operand for ``v`` defined by instruction ``idx`` (offset planned later)."""
        dt = dtype if dtype is not None else storage_dtype(self.an, v)
        op = Operand("ws", -1, str(np.dtype(dt)), list(self.an.shape(v)))
        self.loc[id(v)] = op
        self.ws_vals[id(v)] = (v, idx)
        self.root[id(v)] = id(v)
        return op

    def use(self, v: Value, idx: int, keep: bool) -> Operand:
        """The operand of ``v`` read by instruction ``idx`` (extending its buffer's lifetime)."""
        if id(v) in self.sel.alias_of:
            v = self.sel.alias_of[id(v)]
        if id(v) in self.loc:
            r = self.root.get(id(v))
            if r is not None:
                self.last[r] = max(self.last.get(r, -1), idx)
            return self.loc[id(v)]
        if self.an.is_const(v):
            c = self.an.const(v)
            if v.const is not None or id(v) not in self.const_ids:
                op = self.add_const(c, keep)
                self.loc[id(v)] = op
                return op
        raise CompileError(f"value {v.name!r} is read before it is produced")

    # -- instructions -----------------------------------------------------
    def emit_inputs(self) -> None:
        """Bind graph inputs; those stored in another type get a cast into the workspace."""
        an = self.an
        for i, v in enumerate(self.graph.inputs):
            st = storage_dtype(an, v)
            op_in = Operand("in", i, str(an.dtype(v)), list(an.shape(v)))
            if np.dtype(st) != an.dtype(v):
                k = len(self.instrs)
                dst = self.new_ws(v, k, st)
                self.instrs.append(Instr("cast", f"input:{v.name}", [op_in], [dst], {}, 0, self.fdt))
            else:
                self.loc[id(v)] = op_in

    def emit_step(self, st: Step) -> None:
        """One instruction for ``st``; an alias only re-labels its source operand."""
        k = len(self.instrs)
        keep = id(st) in self.sel.int8_steps
        if st.kernel == "alias":
            x = st.ins[0]
            src = self.add_const(x, keep) if isinstance(x, np.ndarray) else self.use(x, k, keep)
            out = st.outs[0]
            self.loc[id(out)] = Operand(src.space, src.offset, src.dtype, list(self.an.shape(out)))
            if src.space == "ws":
                in_ws = not isinstance(x, np.ndarray) and id(x) in self.root
                self.root[id(out)] = self.root[id(x)] if in_ws else id(out)
            return
        ins = []
        for x in st.ins:
            if x is None:
                ins.append(None)
            elif isinstance(x, np.ndarray):
                ins.append(self.add_const(x, keep))
            else:
                ins.append(self.use(x, k, keep))
        outs = [self.new_ws(o, k) for o in st.outs]
        dtype = "int8" if keep and st.kernel != "dequantize" or st.kernel == "quantize" else self.fdt
        self.instrs.append(Instr(st.kernel, ",".join(o.name for o in st.outs)[:200], ins, outs, st.attrs, st.macs,
                                 dtype))

    def emit_outputs(self) -> None:
        """A cast from each graph output's value into its output slot."""
        for j, v in enumerate(self.graph.outputs):
            k = len(self.instrs)
            src = self.use(v, k, False)
            dst = Operand("out", j, self.outputs[j].dtype, self.outputs[j].shape)
            self.instrs.append(Instr("cast", f"output:{v.name}", [src], [dst], {}, 0, self.fdt))

    # -- memory -----------------------------------------------------------
    def plan_workspace(self) -> int:
        """Lifetime-based workspace offsets (aliases share their root's buffer); the workspace size."""
        bufs: dict[int, Buffer] = {}
        for vid, (v, idx) in self.ws_vals.items():
            if self.root.get(vid) != vid:
                continue
            bufs[vid] = Buffer(len(bufs), self.loc[vid].nbytes, idx, max(self.last.get(vid, idx), idx))
        ws_size = plan_offsets(list(bufs.values()))
        for vid, op in list(self.loc.items()):
            if op.space == "ws":
                r = self.root.get(vid, vid)
                op.offset = bufs[r].offset
        return ws_size

    def finish(self, ws_size: int) -> Lowered:
        """The weights blob and the validated program; raises :class:`CompileError` when it does not fit."""
        profile, fdt, const_size = self.profile, self.fdt, self.const_size
        weights = bytearray(const_size)
        for a, off in self.consts:
            weights[off:off + a.nbytes] = a.tobytes()
        # exact-only (fp32 asked of an fp16/int8 chip): every node computes what fp32 would, bit for bit
        label = "fp32" if self.an.exact_only else fdt if not self.an.groups else f"{fdt}+int8"
        prog = Program(profile.chip_id, label, self.inputs, self.outputs,
                       self.instrs, ws_size, const_size)
        need = ws_size + const_size + sum(align(Operand("in", 0, t.dtype, t.shape).nbytes)
                                          for t in self.inputs + self.outputs)
        if need > profile.device_memory_bytes:
            raise CompileError(
                f"partition {self.graph.name!r} needs {need} bytes of device memory (weights {const_size}, "
                f"workspace {ws_size}, I/O) but chip {profile.name!r} has {profile.device_memory_bytes}")
        prog.validate()
        return Lowered(prog, bytes(weights))
