"""The measured choice found again without importing every engine.

A measuring build with ``cache_dir`` stores its winner under the model-cache
key of the measuring config, and that key covers every candidate backend's
``cache_fingerprint()``: computing it imports and initializes every installed
engine (OpenVINO: ~0.15 s on a quiet machine), also when the stored plan runs
on another one.  So next to the entry the build writes a small JSON *choice
record* (``<key>.choice.nnrtc``), keyed by what is known before any plugin is
imported (:func:`choice_key`):

* the model digest and the config, as the entry's key;
* the backend and scheduler plugins found: entry-point names, distributions,
  versions, whether blocked (:meth:`Registry.discovery_fingerprint`), the
  registry's environment and ``NNRT_MEASURE``;
* the installed distributions (their ``*.dist-info`` / ``*.egg-info`` folder
  names, which carry the versions): an engine installed, removed or upgraded
  changes the key;
* the machine: architecture, CPU model, CPU count.

The record names the entry and the ``cache_fingerprint()`` of each backend
the entry's partitions run on.  A later build with the same key imports only
those backends' plugins, checks their fingerprints against the record and
loads the entry: it measures nothing and imports no other engine.  A missing,
malformed or oversized record, a fingerprint that differs, an entry that is
gone: the ordinary path (every backend selected and fingerprinted), which
loads the entry by its full key or builds and measures again.

Not written (the ordinary path only) when a plugin was registered
programmatically or an entry point has no distribution version: nothing then
identifies the plugins before they are imported.  What the record cannot see:
a device of an unused engine that appears while no installed package changes
(a GPU plugged in); the stored choice stays until ``cache_version`` is raised
or the cache cleared.
"""
from __future__ import annotations

import json
import os
import platform
import re
import stat
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from nnrt_core.backend.warming import prepare_build
from nnrt_core.config import AUTO_SCHEDULER as AUTO, RUNTIME_OPTIONS, ScheduleConfig
from nnrt_core.entry_points import installed_distributions
from nnrt_core.logs import get_logger
from nnrt_core.registry import Registry
from nnrt_core.storage.files import write_atomic

if TYPE_CHECKING:
    from nnrt_core.compiler.model import CompiledModel
    from nnrt_core.storage.model_cache import ModelCache

__all__ = ["CHOICE_SUFFIX", "MAX_RECORD_BYTES", "StoredChoice", "choice_key", "may_measure", "open_choice"]

log = get_logger("nnrt.cache")

CHOICE_SUFFIX = ".choice.nnrtc"  #: ends like the entries, so the cache's stale-temporary cleanup covers its writes
#: a choice record larger than this is refused unread (a real one is a few hundred bytes)
MAX_RECORD_BYTES = 1 << 16
RECORD_FORMAT = 1
#: environment variables that change which plan a measuring build makes
_ENV = ("NNRT_MEASURE", "NNRT_BLOCK_PLUGINS", "NNRT_DISABLE_PLUGIN_AUTOLOAD", "NNRT_PLUGINS")
_KEY = re.compile(r"[0-9a-f]{40}")


def may_measure(config: ScheduleConfig) -> bool:
    """Whether a build of ``config`` may measure (and so store a choice):
    the config names no scheduler but ``measured`` or ``auto``, or asks for ``precision="auto"``."""
    return config.scheduler in (AUTO, "measured") or config.precision == AUTO


@lru_cache(maxsize=1)
def _machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            for line in f.read(1 << 16).decode("utf-8", "replace").splitlines():
                if line.lower().startswith(("model name", "cpu model", "hardware")):
                    model = line.split(":", 1)[-1].strip()
                    break
    except OSError:
        pass
    return {"arch": platform.machine(), "cpu": model or platform.processor(), "cpus": os.cpu_count()}


def choice_key(cache: "ModelCache", digest: str, config: ScheduleConfig, registry: Registry) -> str | None:
    """The key of the choice record (see the module docstring); ``None`` when
    the plugins cannot be identified before they are imported."""
    plugins = registry.discovery_fingerprint()
    dists = installed_distributions()
    if plugins is None or dists is None:
        return None
    compiled_by = {k: v for k, v in config.to_dict().items() if k not in RUNTIME_OPTIONS}
    env = {k: os.environ.get(k) for k in _ENV} | {k: registry.env.get(k) for k in _ENV[1:]}
    return cache.key(digest, compiled_by, [{"choice_record": RECORD_FORMAT, "plugins": plugins, "dists": dists,
                                            "env": env, "machine": dict(_machine())}])


def _normalized(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


class StoredChoice:
    """The choice record of one measuring config in one cache folder."""

    __slots__ = ("cache", "key", "digest")

    def __init__(self, cache: "ModelCache", key: str, digest: str) -> None:
        self.cache, self.key, self.digest = cache, key, digest

    @property
    def path(self) -> str:
        return str(self.cache.dir / f"{self.key}{CHOICE_SUFFIX}")

    def _record(self) -> dict[str, Any] | None:
        try:  # non-blocking: a FIFO planted under the record's name cannot hang the build
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO, a device, a directory: never read
                log.warning("model cache: choice record %s is not a regular file; ignored", self.path)
                return None
            data = os.read(fd, MAX_RECORD_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > MAX_RECORD_BYTES:
            log.warning("model cache: choice record %s is over %d bytes; ignored", self.path, MAX_RECORD_BYTES)
            return None
        try:
            record = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            log.warning("model cache: choice record %s is not valid JSON; ignored", self.path)
            return None
        if (not isinstance(record, dict) or record.get("format") != RECORD_FORMAT
                or not isinstance(record.get("entry"), str) or not _KEY.fullmatch(record["entry"])
                or not isinstance(record.get("backends"), dict) or not record["backends"]):
            log.warning("model cache: choice record %s is malformed; ignored", self.path)
            return None
        return record

    def entry(self, config: ScheduleConfig, registry: Registry) -> str | None:
        """The key of the stored entry when the record holds and the backends
        it names (imported now, no other) have the fingerprints it recorded;
        their build preparation is started as a build's select stage starts it."""
        record = self._record()
        if record is None:
            return None
        for name, fingerprint in record["backends"].items():
            rec = registry.find_backend(name)
            if rec is None or not rec.available or rec.backend is None:
                return None
            prepare_build(rec.backend, config.backend_options.get(name))  # as early as in select (heap prefault...)
            try:
                now = _normalized(rec.backend.cache_fingerprint())
            except Exception:  # noqa: BLE001 - a buggy plugin: the ordinary path reports it
                return None
            if now != fingerprint:
                log.info("model cache: choice record %s: backend %r changed; measuring path taken", self.path, name)
                return None
        return record["entry"]

    def store(self, built: "CompiledModel", entry_key: str) -> None:
        """Record ``built`` (just stored under ``entry_key``) as the choice; a
        failure to write is logged (the ordinary path still finds the entry)."""
        try:
            backends = {st.backend.name: _normalized(st.backend.cache_fingerprint()) for st in built.steps}
        except Exception as e:  # noqa: BLE001 - the entry stays usable by its full key
            log.warning("model cache: no choice record written: a backend's cache_fingerprint() raised %s", e)
            return
        data = json.dumps({"format": RECORD_FORMAT, "entry": entry_key, "backends": backends}, sort_keys=True)
        try:
            write_atomic(self.path, data.encode("utf-8"))
        except OSError as e:
            log.warning("model cache: cannot write choice record %s: %s", self.path, e)


def open_choice(model: Any, config: ScheduleConfig, registry: Registry) -> StoredChoice | None:
    """The choice record for building ``model`` with ``config`` (which has a
    ``cache_dir`` and :func:`may_measure`), or ``None`` when none can be keyed."""
    from nnrt_core.frontends import model_digest
    from nnrt_core.storage.model_cache import ModelCache

    digest = model_digest(model)
    if digest is None:
        return None
    cache = ModelCache(config.cache_dir, config.cache_version)
    key = choice_key(cache, digest, config, registry)
    return None if key is None else StoredChoice(cache, key, digest)
