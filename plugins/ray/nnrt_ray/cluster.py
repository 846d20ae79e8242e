"""Connecting to Ray: an existing cluster (``address``), the one this process
already joined, or a local instance sized to the machine that also offers the
installed device backends' devices as custom resources."""
from __future__ import annotations

import os
import socket
from typing import Any, Mapping

import ray

from nnrt_core.errors import ConfigError
from nnrt_core.plugin_api import default_registry

__all__ = ["connect", "probe", "local_device_resources", "check_resources", "CONNECT_TIMEOUT_S"]

CONNECT_TIMEOUT_S = 5.0


def local_device_resources() -> dict[str, float]:
    """``{backend: number of devices}`` for every available device backend
    installed here (e.g. ``{"npu_emu": 3}``): what a local instance offers."""
    out = {}
    for rec in default_registry().backends.values():
        if rec.available and rec.device_type not in ("cpu", ""):
            devices = [d for d in rec.to_dict()["devices"] if d.get("available", True) and "error" not in d]
            if devices:
                out[rec.name] = float(len(devices))
    return out


def probe(address: str) -> None:
    """A clear error, within seconds, when nothing listens at ``address``."""
    target = address.split("://", 1)[-1]
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--address {address!r} is not HOST:PORT (or ray://HOST:PORT, or 'auto')")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise ConfigError(f"cannot reach a Ray cluster at {address!r}: {e} (is `ray start --head` running "
                          "there, and is the port open?)") from e


def connect(address: str | None = None, *, num_cpus: int | None = None) -> bool:
    """Join Ray; returns True when this call started it (the caller shuts it
    down).  No address and no Ray in this process: a local instance with
    every core (``num_cpus``) and the local device backends' resources."""
    if address not in (None, "auto"):
        probe(address)
    if ray.is_initialized():
        return False
    quiet: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address is None:
        ray.init(num_cpus=num_cpus or os.cpu_count() or 1, resources=local_device_resources(), **quiet)
        return True
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, TimeoutError) as e:
        raise ConfigError(f"cannot join the Ray cluster at {address!r}: {e}") from e
    return True


def check_resources(need: Mapping[str, float], workers: int) -> None:
    """Fail now, not hang, when the cluster cannot place ``workers`` actors
    that each need ``need`` (custom device resources)."""
    have = ray.cluster_resources()
    short = {k: (v * workers, have.get(k, 0.0)) for k, v in need.items() if have.get(k, 0.0) < v * workers}
    if short:
        text = ", ".join(f"{k!r}: {w:g} needed, the cluster has {h:g}" for k, (w, h) in short.items())
        raise ConfigError(f"{workers} worker(s) need device resources the cluster lacks ({text}); use fewer "
                          f"--workers or start Ray nodes with e.g. --resources='{{\"{next(iter(short))}\": 1}}'")
