"""A served model's ``nnrt.toml``: the :class:`ScheduleConfig` fields of the
session plus the serving ones (:class:`ServingSettings`)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from nnrt_core import ScheduleConfig
from nnrt_core.errors import ConfigError
from nnrt_core.plugin_api import CORES

__all__ = ["ServingSettings", "load_model_config", "split_cores", "CONFIG_FILE"]

CONFIG_FILE = "nnrt.toml"


@dataclass(frozen=True)
class ServingSettings:
    """How requests reach one model's session.

    max_batch_size
        the most rows one execution stacks from queued requests (0: no
        dynamic batching; each request runs on its own).  Needs a free
        leading (batch) dimension on every input and output.
    max_queue_delay_ms
        how long the first request of a batch waits for others to join it.
    instances
        executions of this model at once (each takes the next batch).  With
        more than one and no ``num_threads`` in the config, each execution
        gets its share of the cores (:func:`split_cores`).
    max_queue_size
        requests waiting at most; one more is refused with 503 /
        ``UNAVAILABLE`` (0: ``64 * instances``).
    default_timeout_ms
        the deadline of a request that names none (0: no deadline).
    fair_share
        with several instances, a forming batch stops at its share of the
        rows in the server, ``ceil((queued + forming + running rows) /
        instances)``, and runs at once when it holds it (the delay only
        bounds the wait below the share), so the rows spread over every
        instance instead of one large batch leaving the others idle
        (``false``: fill up to ``max_batch_size`` or the delay, the rule
        of a single instance).
    """

    max_batch_size: int = 0
    max_queue_delay_ms: float = 0.0
    instances: int = 1
    max_queue_size: int = 0
    default_timeout_ms: float = 0.0
    fair_share: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.fair_share, bool):
            raise ConfigError(f"fair_share must be true or false, got {self.fair_share!r}")
        for f in fields(self):
            if f.name == "fair_share":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"{f.name} must be a number >= 0, got {v!r}")
        for name in ("max_batch_size", "instances", "max_queue_size"):
            if not isinstance(getattr(self, name), int):
                raise ConfigError(f"{name} must be an integer, got {getattr(self, name)!r}")
        if self.instances < 1:
            raise ConfigError(f"instances must be at least 1, got {self.instances}")
        if self.max_queue_size == 0:
            object.__setattr__(self, "max_queue_size", 64 * self.instances)

    @classmethod
    def names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    def with_overrides(self, overrides: Mapping[str, Any]) -> "ServingSettings":
        return replace(self, **dict(overrides))


def load_model_config(folder: Path, base: ScheduleConfig | None = None) -> tuple[ScheduleConfig, ServingSettings]:
    """The session config and serving settings of the model in ``folder``:
    its ``nnrt.toml`` (keys of :class:`ScheduleConfig` and of
    :class:`ServingSettings`, optionally under ``[nnrt]``) over ``base``."""
    base = base if base is not None else ScheduleConfig()
    path = folder / CONFIG_FILE
    if not path.is_file():
        return base, ServingSettings()
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from e
    data = data.get("nnrt", data)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a table")
    serving = {k: data.pop(k) for k in list(data) if k in ServingSettings.names()}
    known = set(ScheduleConfig.fields())
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {unknown}; valid keys: "
                          f"{', '.join(sorted(known | ServingSettings.names()))}")
    config = base.replace(**data) if data else base
    settings = ServingSettings(**serving)
    return split_cores(config, settings), settings


def split_cores(config: ScheduleConfig, settings: ServingSettings, cores: int = CORES) -> ScheduleConfig:
    """``config`` with ``num_threads = max(1, cores // instances)`` when the model runs
    several instances and the config fixes no thread count: the instances'
    executions then never ask for more threads than there are cores (a run
    that found itself alone would otherwise take every core, and its
    backend's thread pool would spin against the other runs and the
    server's event loop)."""
    if settings.instances <= 1 or config.num_threads:
        return config
    return config.replace(num_threads=max(1, cores // settings.instances))
