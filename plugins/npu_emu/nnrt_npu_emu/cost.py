"""The cost model: simulated cycles of each instruction and of a run."""
from __future__ import annotations

import math
from typing import Any, Iterator, Mapping, Sequence

from nnrt_npu_emu.profiles import ChipProfile
from nnrt_npu_emu.program import Instr

__all__ = ["estimate", "summarize", "SRAM_SPEEDUP", "RunProfile"]

#: on-chip SRAM bandwidth relative to device DRAM
SRAM_SPEEDUP = 4.0


def estimate(ins: Instr, profile: ChipProfile) -> None:
    """Fill ``ins.cycles`` / ``ins.bound``: max(compute, memory) + launch cost.

    compute = MACs / MACs-per-cycle of the instruction's dtype; memory =
    bytes moved / bandwidth (SRAM rate when the instruction's operands fit
    on chip, DRAM rate otherwise)."""
    moved = sum(o.nbytes for o in ins.ins if o is not None) + sum(o.nbytes for o in ins.outs)
    compute = ins.macs / max(profile.mpc(ins.dtype), 1)
    bw = profile.bytes_per_cycle * (SRAM_SPEEDUP if moved <= profile.onchip_bytes else 1.0)
    memory = moved / max(bw, 1e-9)
    ins.cycles = int(math.ceil(max(compute, memory))) + int(profile.launch_cycles)
    ins.bound = "compute" if compute >= memory else "memory"


def summarize(instrs: Sequence[Instr], profile: ChipProfile) -> dict[str, Any]:
    """Totals per run plus a per-op table."""
    cycles = sum(i.cycles for i in instrs)
    macs = sum(i.macs for i in instrs)
    clock = profile.clock_mhz * 1e6
    return {
        "chip": profile.chip_id,
        "instructions": len(instrs),
        "cycles": cycles,
        "time_ms": cycles / clock * 1e3,
        "macs": macs,
        "compute_bound": sum(1 for i in instrs if i.bound == "compute"),
        "memory_bound": sum(1 for i in instrs if i.bound == "memory"),
        "per_op": [{"node": i.node, "kernel": i.kernel, "dtype": i.dtype, "macs": i.macs, "cycles": i.cycles,
                    "time_us": i.cycles / clock * 1e6, "bound": i.bound} for i in instrs],
    }


class RunProfile(Mapping[str, Any]):
    """The profile of one run: the cost model's cycles and time, the host wall
    time, and the per-instruction table with host microseconds (built when
    first read: a run only records its timings)."""

    def __init__(self, estimate: Mapping[str, Any], host_seconds: float, trace: Sequence[float]) -> None:
        self._estimate, self._host, self._trace = estimate, host_seconds, trace
        self._data: dict[str, Any] | None = None

    def _table(self) -> dict[str, Any]:
        if self._data is None:
            est = self._estimate
            self._data = {"cycles": est["cycles"], "time_ms": est["time_ms"], "host_seconds": self._host,
                          "per_op": [dict(p, host_us=h * 1e6) for p, h in zip(est["per_op"], self._trace)]}
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())
