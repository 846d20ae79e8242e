"""``ScheduleConfig``: how a session picks backends and what it asks of them.

Modelled on MNN's ScheduleConfig/BackendConfig and NNRt's compilation options.
Values are validated on construction; backend and scheduler *names* are
checked against the installed plugins when a session is built.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from nnrt_core.errors import ConfigError
from nnrt_core.record import FrozenRecord

if TYPE_CHECKING:
    from nnrt_core.backend.base import CompileOptions
    from nnrt_core.feed_sets import MeasureFeeds

__all__ = ["ScheduleConfig", "PRECISIONS", "PERFORMANCE_MODES", "PRIORITIES", "OPTIMIZATION_LEVELS",
           "SPECIALIZE_SHAPES", "OVERFLOW_POLICIES", "RUNTIME_OPTIONS", "DEFAULT_BACKUP", "DEFAULT_SCHEDULER",
           "AUTO_SCHEDULER", "DEFAULT_PRECISION_TOLERANCE"]

PRECISIONS = ("fp32", "fp16", "bf16", "int8", "auto")
#: ``precision="auto"``: the largest error a reduced-precision plan may show against fp32 (default)
DEFAULT_PRECISION_TOLERANCE = 1e-2
SPECIALIZE_SHAPES = ("auto", "always", "never")
#: what a run does when a reduced-precision partition's stores overflow (``on_overflow``)
OVERFLOW_POLICIES = ("fallback", "warn", "raise")
#: options that change how a session runs, not what it compiles (left out of cache keys)
RUNTIME_OPTIONS = ("specialize_shapes", "max_specializations", "max_tensor_bytes", "on_overflow",
                   "specialize_in_background")
PERFORMANCE_MODES = ("none", "low", "medium", "high", "extreme")
PRIORITIES = ("low", "medium", "high")
OPTIMIZATION_LEVELS = ("none", "basic", "extended", "all")


#: the defaults a config starts from: the reference backend and the priority
#: scheduler, whose distributions nnrt-core depends on (the embedded plugins,
#: loaded even with plugin autoload disabled)
DEFAULT_BACKUP = "numpy"
DEFAULT_SCHEDULER = "priority"
#: the config's default scheduler: ``measured`` when two or more real engines are
#: selected, else ``priority`` (nnrt_core/compiler/measure.py; ``NNRT_MEASURE=0``: always ``priority``)
AUTO_SCHEDULER = "auto"


#: the default of the mapping fields (each is copied into a new dict)
_NO_ENTRIES: Mapping[str, Any] = MappingProxyType({})


class ScheduleConfig(FrozenRecord):
    """Session configuration.

    backends
        ordered list of backend names to try, or ``"auto"`` for every
        available backend by default priority.
    backup
        backend for nodes no selected backend supports (``None`` = none; then
        such nodes are an error).
    scheduler
        name of the placement strategy (an installed scheduler plugin), or
        ``"auto"`` (default): ``measured`` when two or more real engines are
        selected (each engine's plan timed on the session's input shapes, the
        fastest kept), else ``priority``.
    pins
        node name -> backend name, forcing placement of those nodes.
    backend_options
        backend name -> free-form extension attributes for that backend.
    devices
        backend name -> device id or name to use on that backend.
    input_shapes
        input name -> concrete shape, fixing free (dynamic) input dimensions
        when the model is loaded, before the graph passes, so that static
        shapes propagate (like ONNX Runtime's free-dimension overrides or
        OpenVINO's ``reshape``); checked against the model when it loads.
    strict
        refuse (instead of warn about) options a selected backend ignores.
    specialize_shapes
        ``"auto"`` (default): a model with free input dimensions is planned
        again for the concrete shapes of each new input signature it runs with
        (MNN's resize) when a selected backend needs static shapes
        (``Backend.needs_static_shapes``); ``"always"`` whatever the backends;
        ``"never"`` keeps the one dynamic plan.
    max_specializations
        how many specialized plans a session keeps (least recently used
        evicted first).
    specialize_in_background
        once ``max_specializations`` plans are held, a signature seen again
        is planned on a worker thread while its runs take the dynamic plan,
        and swapped in when built (``True``, default); ``False``: the run
        that sees it again builds the plan (docs/runtime.md).
    max_tensor_bytes
        the session's memory budget: the largest tensor (bytes) a run may
        compute; a bigger one is refused with ``MemoryBudgetError`` before it
        is allocated, and at build when shapes are static.  ``None``:
        ``NNRT_MAX_TENSOR_BYTES`` (8 GiB when unset).
    on_overflow
        what a run does when a partition computing in reduced precision
        reports that its stores saturated (a value beyond fp16's +-65504, or
        NaN from finite inputs; ``NumericOverflowError``): ``"fallback"``
        (default) moves the partition's nodes to ``backup`` (pins, a new
        plan), runs again and keeps the new plan; ``"warn"`` returns the
        saturated result with a ``numeric_overflow`` event and a logged
        warning; ``"raise"`` raises ``ExecutionError`` naming the node.
        Without a backup (or for a session loaded from a compiled file
        that stores no backup copy of the partition: docs/runtime.md)
        ``"fallback"`` raises.  See docs/runtime.md.
    precision
        ``"fp32"`` (default), ``"fp16"``, ``"bf16"``, ``"int8"``: asked of every
        backend (one that cannot honour it warns, or refuses with ``strict``);
        ``"auto"``: the build also tries the reduced precisions each engine's
        device offers, compares their outputs with the fp32 plan's on the
        measurement inputs and keeps the fastest plan whose error is within
        ``precision_tolerance`` (nnrt_core/compiler/measure.py).
    precision_tolerance
        with ``precision="auto"``: the largest ``max|out - fp32 out| /
        max|fp32 out|`` over the outputs a reduced-precision plan may show
        (default 1e-2).
    machine_specific
        let backends keep compiled forms that load faster but only on this
        machine (ONNX Runtime's optimized graph, specific to the CPU's vector
        width): a session file saved from such a build starts faster and is
        refused, with the reason, on another machine (``nnrt compile
        --machine-specific``).  Default ``False``: session files are portable.
        The model cache always stores such forms (it is keyed by machine).
    measure_feeds
        real inputs for measured selection to time the candidate plans (and
        check ``precision="auto"``'s errors) on, instead of synthetic ones: a
        ``{input name: array}`` mapping, a list of at most 16, or the path of
        an ``.npz`` file; checked against the model by a build that measures
        (:mod:`nnrt_core.feed_sets`).  Their xxh3 digest stands for them in
        ``to_dict()`` and so in the model-cache key: other feeds measure again.
    """

    __slots__ = ("backends", "backup", "scheduler", "num_threads", "precision", "performance_mode", "priority",
                 "optimization_level", "cache_dir", "cache_version", "pins", "backend_options", "devices", "strict",
                 "input_shapes", "specialize_shapes", "max_specializations", "max_tensor_bytes", "on_overflow",
                 "precision_tolerance", "machine_specific", "specialize_in_background", "measure_feeds")
    backends: tuple[str, ...] | str
    backup: str | None
    scheduler: str
    num_threads: int
    precision: str
    performance_mode: str
    priority: str
    optimization_level: str
    cache_dir: str | None
    cache_version: int
    pins: Mapping[str, str]
    backend_options: Mapping[str, Mapping[str, Any]]
    devices: Mapping[str, str]
    strict: bool
    input_shapes: Mapping[str, tuple[int, ...]]
    specialize_shapes: str
    max_specializations: int
    max_tensor_bytes: int | None
    on_overflow: str
    precision_tolerance: float
    machine_specific: bool
    specialize_in_background: bool
    measure_feeds: MeasureFeeds | None

    def __init__(self, backends: tuple[str, ...] | str = "auto", backup: str | None = DEFAULT_BACKUP,
                 scheduler: str = AUTO_SCHEDULER, num_threads: int = 0, precision: str = "fp32",
                 performance_mode: str = "none", priority: str = "medium", optimization_level: str = "basic",
                 cache_dir: str | None = None, cache_version: int = 1, pins: Mapping[str, str] = _NO_ENTRIES,
                 backend_options: Mapping[str, Mapping[str, Any]] = _NO_ENTRIES,
                 devices: Mapping[str, str] = _NO_ENTRIES, strict: bool = False,
                 input_shapes: Mapping[str, tuple[int, ...]] = _NO_ENTRIES, specialize_shapes: str = "auto",
                 max_specializations: int = 8, max_tensor_bytes: int | None = None,
                 on_overflow: str = "fallback",
                 precision_tolerance: float = DEFAULT_PRECISION_TOLERANCE, machine_specific: bool = False,
                 specialize_in_background: bool = True, measure_feeds: Any = None) -> None:
        values = locals()
        for name in self.__slots__:
            object.__setattr__(self, name, values[name])
        self._check()

    def _check(self) -> None:
        """Validate and normalise the fields (a ``ConfigError`` names the bad one)."""
        b = self.backends
        if isinstance(b, str):
            if b != "auto":
                b = tuple(x.strip() for x in b.split(",") if x.strip())
        elif isinstance(b, (list, tuple)):
            if not all(isinstance(x, str) and x for x in b):
                raise ConfigError(f"backends must be a list of backend names or 'auto', got {b!r}")
            b = tuple(b)
        else:
            raise ConfigError(f"backends must be a list of backend names or 'auto', got {b!r}")
        if b != "auto" and len(set(b)) != len(b):
            raise ConfigError(f"backends lists a backend twice: {list(b)}")
        object.__setattr__(self, "backends", b)
        if self.backup is not None and (not isinstance(self.backup, str) or not self.backup):
            raise ConfigError(f"backup must be a backend name or None, got {self.backup!r}")
        if not isinstance(self.scheduler, str) or not self.scheduler:
            raise ConfigError(f"scheduler must be a scheduler name, got {self.scheduler!r}")
        _choice("precision", self.precision, PRECISIONS)
        tol = self.precision_tolerance
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
            raise ConfigError(f"precision_tolerance must be a number in (0, 1) (the largest error of a reduced-"
                              f"precision plan relative to max|fp32 output|), got {tol!r}")
        object.__setattr__(self, "precision_tolerance", float(tol))
        _choice("performance_mode", self.performance_mode, PERFORMANCE_MODES)
        _choice("priority", self.priority, PRIORITIES)
        object.__setattr__(self, "optimization_level", _optimization_level(self.optimization_level))
        if not isinstance(self.num_threads, int) or isinstance(self.num_threads, bool) or not 0 <= self.num_threads <= 1024:
            raise ConfigError(f"num_threads must be an integer in 0..1024 (0 = backend default), got {self.num_threads!r}")
        for flag in ("machine_specific", "specialize_in_background"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        if not isinstance(self.cache_version, int) or self.cache_version < 0:
            raise ConfigError(f"cache_version must be a non-negative integer, got {self.cache_version!r}")
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", os.fspath(self.cache_dir))
        for name, mapping in (("pins", self.pins), ("devices", self.devices)):
            if not isinstance(mapping, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
            ):
                raise ConfigError(f"{name} must map names to backend/device names, got {mapping!r}")
            object.__setattr__(self, name, dict(mapping))
        if not isinstance(self.backend_options, Mapping) or not all(
            isinstance(v, Mapping) for v in self.backend_options.values()
        ):
            raise ConfigError(f"backend_options must map backend names to option tables, got {self.backend_options!r}")
        object.__setattr__(self, "backend_options", {k: dict(v) for k, v in self.backend_options.items()})
        object.__setattr__(self, "input_shapes", _input_shapes(self.input_shapes))
        _choice("specialize_shapes", self.specialize_shapes, SPECIALIZE_SHAPES)
        _choice("on_overflow", self.on_overflow, OVERFLOW_POLICIES)
        if not isinstance(self.max_specializations, int) or isinstance(self.max_specializations, bool) \
                or not 1 <= self.max_specializations <= 1024:
            raise ConfigError(f"max_specializations must be an integer in 1..1024, got {self.max_specializations!r}")
        if self.max_tensor_bytes is not None and (not isinstance(self.max_tensor_bytes, int) or isinstance(
                self.max_tensor_bytes, bool) or self.max_tensor_bytes < 1):
            raise ConfigError(f"max_tensor_bytes must be a positive integer (bytes) or None, "
                              f"got {self.max_tensor_bytes!r}")
        if self.measure_feeds is not None:
            from nnrt_core.feed_sets import MeasureFeeds  # numpy: only for a config that gives feeds

            object.__setattr__(self, "measure_feeds", MeasureFeeds.coerce(self.measure_feeds))

    # ------------------------------------------------------------ building
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ScheduleConfig":
        known = set(cls.fields())
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config keys {unknown}; valid keys: {', '.join(sorted(known))}")
        return cls(**dict(data))

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "ScheduleConfig":
        """Load from a ``.toml`` or ``.json`` file (a ``[nnrt]`` table in TOML is
        accepted too)."""
        import json  # only when a file is read
        import tomllib

        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {str(p)!r} does not exist")
        try:
            if p.suffix == ".json":
                data = json.loads(p.read_text())
            elif p.suffix == ".toml":
                data = tomllib.loads(p.read_text())
                data = data.get("nnrt", data)
            else:
                raise ConfigError(f"config file {str(p)!r} must end in .toml or .json")
        except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"config file {str(p)!r} is not valid: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"config file {str(p)!r} must hold a table/object")
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        import copy  # like dataclasses.asdict: nothing shared with the config

        d = {k: copy.deepcopy(v) for k, v in self.as_dict().items() if k != "measure_feeds"}
        d["backends"] = self.backends if self.backends == "auto" else list(self.backends)
        d["measure_feeds"] = None if self.measure_feeds is None else self.measure_feeds.digest  # the arrays' stand-in
        return d

    def compile_options(self, backend: str) -> CompileOptions:
        """The options handed to ``backend`` when compiling."""
        from nnrt_core.backend.base import CompileOptions  # numpy and the IR: not for ``nnrt --help``

        return CompileOptions(
            precision=self.precision,
            num_threads=self.num_threads,
            performance_mode=self.performance_mode,
            priority=self.priority,
            device=self.devices.get(backend),
            extra=dict(self.backend_options.get(backend, {})),
            serializable=self.cache_dir is not None or self.machine_specific,
        )

    def requested_options(self) -> set[str]:
        """Options set away from their defaults (to warn about unsupported ones);
        ``precision="auto"`` asks no backend for anything (the build tries what each offers)."""
        return {n for n, default in _option_defaults().items()
                if getattr(self, n) != default and not (n == "precision" and self.precision == "auto")}


@functools.cache
def _option_defaults() -> dict[str, Any]:
    """The defaults :meth:`ScheduleConfig.requested_options` compares with, made once
    (every build asks, and a new config costs ~30 µs)."""
    defaults = ScheduleConfig()
    return {n: getattr(defaults, n) for n in ("num_threads", "precision", "performance_mode", "priority")}

#: ONNX Runtime's GraphOptimizationLevel numbers, accepted as aliases
_ORT_LEVELS = {0: "none", 1: "basic", 2: "extended", 99: "all"}


def _optimization_level(value: Any) -> str:
    """A level name (any case), or ONNX Runtime's number for it (0/1/2/99)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in _ORT_LEVELS:
        return _ORT_LEVELS[value]
    if isinstance(value, str) and value.strip().lower() in OPTIMIZATION_LEVELS:
        return value.strip().lower()
    raise ConfigError(f"optimization_level must be one of {', '.join(OPTIMIZATION_LEVELS)} "
                      f"(or ONNX Runtime's 0/1/2/99); got {value!r}")


def _input_shapes(value: Any) -> dict[str, tuple[int, ...]]:
    """``{input name: [non-negative ints]}``; names and ranks are checked
    against the model when it loads."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"input_shapes must map input names to shapes (lists of sizes), got {value!r}")
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in value.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"input_shapes: keys must be input names, got {name!r}")
        if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ConfigError(f"input_shapes[{name!r}] must be a list of non-negative integer sizes, got {shape!r}")
        out[name] = tuple(int(d) for d in shape)
    return out


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
