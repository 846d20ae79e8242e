"""The device program: instructions over operands placed in device memory."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from nnrt_core.errors import CompileError
from nnrt_npu_emu.ops import KERNELS

__all__ = ["Operand", "Instr", "TensorSpec", "Program", "DTYPES"]

#: element types device memory may hold
DTYPES = frozenset({"float32", "float16", "int8", "uint8", "int32", "int64", "bool"})
SPACES = ("ws", "const", "in", "out")


@dataclass
class Operand:
    """Where an instruction reads or writes: ``space`` ws/const (byte offset
    into the program's workspace / weights) or in/out (index of a run's
    input / output tensor)."""

    space: str
    offset: int
    dtype: str
    shape: list[int]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class Instr:
    kernel: str
    node: str
    ins: list[Operand | None]
    outs: list[Operand]
    attrs: dict[str, Any] = field(default_factory=dict)
    macs: int = 0
    dtype: str = "fp16"  #: compute type (for the cost model)
    cycles: int = 0
    bound: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Instr":
        ins = [None if o is None else Operand(**o) for o in d["ins"]]
        outs = [Operand(**o) for o in d["outs"]]
        return cls(d["kernel"], d["node"], ins, outs, dict(d["attrs"]), int(d["macs"]), d["dtype"],
                   int(d["cycles"]), d["bound"])


@dataclass
class TensorSpec:
    name: str
    dtype: str
    shape: list[int]


@dataclass
class Program:
    """A compiled partition for one chip."""

    chip_id: str
    precision: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    instrs: list[Instr]
    ws_size: int
    const_size: int

    def to_dict(self) -> dict[str, Any]:
        return {"chip_id": self.chip_id, "precision": self.precision,
                "inputs": [asdict(t) for t in self.inputs], "outputs": [asdict(t) for t in self.outputs],
                "instrs": [i.to_dict() for i in self.instrs], "ws_size": self.ws_size,
                "const_size": self.const_size}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Program":
        try:
            p = cls(str(d["chip_id"]), str(d["precision"]), [TensorSpec(**t) for t in d["inputs"]],
                    [TensorSpec(**t) for t in d["outputs"]], [Instr.from_dict(i) for i in d["instrs"]],
                    int(d["ws_size"]), int(d["const_size"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CompileError(f"offline model program is malformed: {type(e).__name__}: {e}") from None
        p.validate()
        return p

    def validate(self) -> None:
        """Refuse programs that would read or write outside their regions."""
        limits = {"ws": self.ws_size, "const": self.const_size}
        for t in self.inputs + self.outputs:
            if t.dtype not in DTYPES or any(not isinstance(s, int) or s < 0 for s in t.shape):
                raise CompileError(f"offline model tensor {t.name!r} has a bad type {t.dtype}{t.shape}")
        for k, ins in enumerate(self.instrs):
            if ins.kernel not in KERNELS:
                raise CompileError(f"offline model instruction {k} uses unknown kernel {ins.kernel!r}")
            for o in [x for x in ins.ins if x is not None] + ins.outs:
                if o.space not in SPACES or o.dtype not in DTYPES or not isinstance(o.offset, int) \
                        or any(not isinstance(s, int) or s < 0 for s in o.shape):
                    raise CompileError(f"offline model instruction {k} ({ins.kernel}) has a bad operand {o}")
                if o.space in limits:
                    if o.offset < 0 or o.offset + o.nbytes > limits[o.space]:
                        raise CompileError(f"offline model instruction {k} ({ins.kernel}) operand is outside "
                                           f"its {o.space} region")
                else:
                    specs = self.inputs if o.space == "in" else self.outputs
                    if not 0 <= o.offset < len(specs) or specs[o.offset].dtype != o.dtype \
                            or list(specs[o.offset].shape) != list(o.shape) and \
                            int(np.prod(specs[o.offset].shape)) != int(np.prod(o.shape)):
                        raise CompileError(f"offline model instruction {k} ({ins.kernel}) refers to a bad "
                                           f"{o.space} tensor {o.offset}")
            if any(o.space in ("in", "const") for o in ins.outs):
                raise CompileError(f"offline model instruction {k} writes to read-only memory")

    def execute(self, view: Callable[[Operand], np.ndarray], trace: list[float] | None = None) -> None:
        """Run every instruction in order; ``view`` maps an operand to its
        device-memory array.  ``trace`` collects host seconds per instruction."""
        import time
        for ins in self.instrs:
            t0 = time.perf_counter() if trace is not None else 0.0
            args = [None if o is None else view(o) for o in ins.ins]
            outs = [view(o) for o in ins.outs]
            KERNELS[ins.kernel](args, outs, ins.attrs)
            if trace is not None:
                trace.append(time.perf_counter() - t0)
