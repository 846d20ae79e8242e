"""Chip profiles: what an emulated NPU accepts and how fast it is.

A profile is a plain description of one chip.  Two are built in (a small
int8-only chip and an fp16 chip); more can be loaded from TOML or JSON files
named by ``NNRT_NPU_PROFILES=path1:path2`` or ``CompileOptions.extra["profile_file"]``::

    [[chip]]                      # JSON: {"chips": [{...}, ...]}
    name = "acme-n1"
    vendor = "acme"
    version = "2.1"
    dtypes = ["fp16", "int8"]     # fp32 | fp16 | int8
    macs_per_cycle = {fp16 = 512, int8 = 2048}
    clock_mhz = 1000
    bandwidth_gbps = 17.0         # device DRAM bandwidth
    onchip_kib = 1024             # on-chip SRAM
    device_memory_mib = 256
    launch_cycles = 300           # fixed cost of each instruction
    max_rank = 4                  # 4 or 5: axes one instruction addresses (reshapes
                                  # need none, a transpose counts its folded axes)
    ops = ["Conv", "Relu"]        # optional: default = every op the emulator has
    exclude_ops = ["Gelu"]        # optional
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from nnrt_core.errors import ConfigError

__all__ = ["ChipProfile", "BUILTIN_PROFILES", "load_profiles", "parse_profile", "ENV_PROFILES", "DTYPES"]

ENV_PROFILES = "NNRT_NPU_PROFILES"
DTYPES = ("fp32", "fp16", "int8")
_MAX_MEMORY = 1 << 40


@dataclass(frozen=True)
class ChipProfile:
    """One emulated chip."""

    name: str
    vendor: str = "nnrt-emu"
    version: str = "1.0"
    dtypes: tuple[str, ...] = ("fp16",)
    macs_per_cycle: Mapping[str, int] = field(default_factory=lambda: {"fp16": 512})
    clock_mhz: float = 800.0
    bandwidth_gbps: float = 16.0
    onchip_bytes: int = 1 << 20
    device_memory_bytes: int = 256 << 20
    launch_cycles: int = 300
    max_rank: int = 4
    ops: frozenset[str] | None = None  #: None = every op the emulator implements
    exclude_ops: frozenset[str] = frozenset()
    source: str = "builtin"

    # -------------------------------------------------------------- identity
    @property
    def chip_id(self) -> str:
        """Identity an offline model is bound to: vendor/name@version."""
        return f"{self.vendor}/{self.name}@{self.version}"

    @property
    def digest(self) -> str:
        """Hash of everything that changes what the compiler emits."""
        d = {"id": self.chip_id, "dtypes": list(self.dtypes), "max_rank": self.max_rank,
             "ops": sorted(self.ops) if self.ops is not None else None,
             "exclude": sorted(self.exclude_ops)}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def supports_op(self, op: str) -> bool:
        if op in self.exclude_ops:
            return False
        return self.ops is None or op in self.ops

    @property
    def float_dtype(self) -> str | None:
        """The float compute type: fp32 if the chip has it, else fp16, else None."""
        for d in ("fp16", "fp32"):
            if d in self.dtypes:
                return d
        return None

    def mpc(self, dtype: str) -> int:
        """MACs per cycle for ``dtype`` (falls back to the slowest declared rate)."""
        if dtype in self.macs_per_cycle:
            return int(self.macs_per_cycle[dtype])
        return int(min(self.macs_per_cycle.values()))

    @property
    def bytes_per_cycle(self) -> float:
        return self.bandwidth_gbps * 1e9 / (self.clock_mhz * 1e6)

    def properties(self) -> dict[str, Any]:
        d = asdict(self)
        d["ops"] = sorted(self.ops) if self.ops is not None else "all"
        d["exclude_ops"] = sorted(self.exclude_ops)
        d["dtypes"] = list(self.dtypes)
        d["macs_per_cycle"] = dict(self.macs_per_cycle)
        d["chip_id"] = self.chip_id
        d["peak_tops"] = {k: round(2 * v * self.clock_mhz * 1e6 / 1e12, 3) for k, v in self.macs_per_cycle.items()}
        return d


BUILTIN_PROFILES: tuple[ChipProfile, ...] = (
    ChipProfile(
        name="emu-npu-f16", version="1.0", dtypes=("fp16",),
        macs_per_cycle={"fp16": 1024}, clock_mhz=800.0, bandwidth_gbps=25.6,
        onchip_bytes=2 << 20, device_memory_bytes=512 << 20, launch_cycles=400, max_rank=4,
    ),
    ChipProfile(
        name="emu-npu-i8", version="1.0", dtypes=("int8",),
        macs_per_cycle={"int8": 2048}, clock_mhz=600.0, bandwidth_gbps=8.0,
        onchip_bytes=512 << 10, device_memory_bytes=64 << 20, launch_cycles=300, max_rank=4,
        exclude_ops=frozenset({"LayerNormalization", "Gelu", "ConvTranspose", "Resize"}),
    ),
)

_KEYS = {"name", "vendor", "version", "dtypes", "macs_per_cycle", "clock_mhz", "bandwidth_gbps",
         "onchip_kib", "device_memory_mib", "launch_cycles", "max_rank", "ops", "exclude_ops"}


def parse_profile(data: Any, where: str = "<profile>") -> ChipProfile:
    """Validate one profile table; :class:`ConfigError` naming the field on error."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: a chip profile must be a table/object, got {type(data).__name__}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown profile key(s) {unknown}; valid keys: {', '.join(sorted(_KEYS))}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: 'name' must be a non-empty string")
    where = f"{where} (chip {name!r})"

    def text(key: str, default: str) -> str:
        v = data.get(key, default)
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{where}: {key!r} must be a non-empty string, got {v!r}")
        return v

    def num(key: str, default: float, lo: float, hi: float) -> float:
        v = data.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
            raise ConfigError(f"{where}: {key!r} must be a number in [{lo}, {hi}], got {v!r}")
        return float(v)

    dtypes = data.get("dtypes", ["fp16"])
    if (not isinstance(dtypes, list) or not dtypes
            or not all(isinstance(d, str) and d in DTYPES for d in dtypes)):
        raise ConfigError(f"{where}: 'dtypes' must be a non-empty list of {list(DTYPES)}, got {dtypes!r}")
    mpc = data.get("macs_per_cycle", {d: 256 for d in dtypes})
    if isinstance(mpc, (int, float)) and not isinstance(mpc, bool):
        mpc = {d: mpc for d in dtypes}
    if (not isinstance(mpc, Mapping) or not mpc or not all(
            k in DTYPES and isinstance(v, (int, float)) and not isinstance(v, bool) and 1 <= v <= 1 << 24
            for k, v in mpc.items())):
        raise ConfigError(f"{where}: 'macs_per_cycle' must map dtypes to positive numbers, got {mpc!r}")
    ops = data.get("ops")
    if ops is not None and (not isinstance(ops, list) or not all(isinstance(o, str) for o in ops)):
        raise ConfigError(f"{where}: 'ops' must be a list of op names, got {ops!r}")
    excl = data.get("exclude_ops", [])
    if not isinstance(excl, list) or not all(isinstance(o, str) for o in excl):
        raise ConfigError(f"{where}: 'exclude_ops' must be a list of op names, got {excl!r}")
    max_rank = num("max_rank", 4, 1, 5)
    if max_rank != int(max_rank):
        raise ConfigError(f"{where}: 'max_rank' must be an integer")
    return ChipProfile(
        name=name.strip(), vendor=text("vendor", "custom"), version=text("version", "1.0"),
        dtypes=tuple(dict.fromkeys(dtypes)), macs_per_cycle={k: int(v) for k, v in mpc.items()},
        clock_mhz=num("clock_mhz", 800, 1, 1e5), bandwidth_gbps=num("bandwidth_gbps", 16, 0.001, 1e5),
        onchip_bytes=int(num("onchip_kib", 1024, 0, _MAX_MEMORY >> 10) * 1024),
        device_memory_bytes=int(num("device_memory_mib", 256, 1 / 1024, _MAX_MEMORY >> 20) * (1 << 20)),
        launch_cycles=int(num("launch_cycles", 300, 0, 1e9)), max_rank=int(max_rank),
        ops=frozenset(ops) if ops is not None else None, exclude_ops=frozenset(excl),
        source=where.split(" (chip")[0],
    )


def load_profiles(path: str | os.PathLike) -> list[ChipProfile]:
    """Chip profiles from a ``.toml`` or ``.json`` file; :class:`ConfigError` on any problem."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"NPU profile file {str(p)!r} does not exist")
    try:
        raw = p.read_text(encoding="utf-8")
        if p.suffix == ".json":
            data = json.loads(raw)
        elif p.suffix == ".toml":
            data = tomllib.loads(raw)
        else:
            raise ConfigError(f"NPU profile file {str(p)!r} must end in .toml or .json")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"NPU profile file {str(p)!r} is malformed: {e}") from e
    if isinstance(data, Mapping) and ("chip" in data or "chips" in data):
        chips = data.get("chip", data.get("chips"))
    else:
        chips = data
    if isinstance(chips, Mapping):
        chips = [chips]
    if not isinstance(chips, list) or not chips:
        raise ConfigError(f"NPU profile file {str(p)!r} must hold a [[chip]] table list (TOML) or "
                          f"{{\"chips\": [...]}} (JSON)")
    out = [parse_profile(c, f"NPU profile file {str(p)!r}, entry {i}") for i, c in enumerate(chips)]
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"NPU profile file {str(p)!r} defines chip(s) {dup} twice")
    return out
