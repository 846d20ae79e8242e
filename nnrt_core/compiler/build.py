"""``compile_model``: the staged build, with the offline-file and model-cache
shortcuts."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nnrt_core.compiler.image import from_image, stored_config, to_image
from nnrt_core.compiler.model import CompiledModel, EventLog
from nnrt_core.compiler.stored_choice import may_measure, open_choice
from nnrt_core.compiler.timing import BuildTimes, stage
from nnrt_core.backend.warming import prepare_build, warm_up_partition
from nnrt_core.config import AUTO_SCHEDULER as AUTO, RUNTIME_OPTIONS, ScheduleConfig
from nnrt_core.errors import ConfigError, NnrtError, SessionFileError
from nnrt_core.gc_pause import paused_gc
from nnrt_core.logs import get_logger
from nnrt_core.registry import Registry, default_registry
from nnrt_core.runtime.heap import wait_for_prefault
from nnrt_core.storage.session_file import decode, looks_like_session_file, read_session_file

if TYPE_CHECKING:  # imported when a session has a cache folder (``_open_cache``) or a source model
    from nnrt_core.compiler.backends import BackendSelection
    from nnrt_core.storage.model_cache import ModelCache

__all__ = ["compile_model", "load_compiled"]

log = get_logger("nnrt.session")


def compile_model(model: Any, config: ScheduleConfig | None = None,
                  registry: Registry | None = None, *, isolate: bool = False) -> CompiledModel:
    """Build ``model`` (path, bytes, ``onnx.ModelProto``, IR ``Model``/``Graph``,
    or a session file) for ``config``: select backends -> optimize -> place ->
    partition -> compile with fallback -> explain.  With ``config.cache_dir`` a
    cached build is loaded instead, or the new one stored.  With ``isolate``
    the model is built in a forked child process first, so a native crash on a
    hostile model is a ``ModelLoadError`` here (:mod:`nnrt_core.compiler.isolate`).  Every partition is
    warmed up (``CompiledPartition.warm_up``) and the stages timed (``build_times``)."""
    if config is not None and not isinstance(config, ScheduleConfig):
        raise ConfigError(f"config must be a ScheduleConfig, got {type(config).__name__}")
    registry = registry if registry is not None else default_registry()
    if isolate:
        from nnrt_core.compiler.isolate import build_isolated  # forks: only isolated builds need it
        build_isolated(compile_model, model, config, registry)
    times = BuildTimes()
    offline = looks_like_session_file(model)  # once: a path is opened and read to tell
    with times.active(), paused_gc():  # a build makes many objects and little garbage (nnrt_core/gc_pause.py)
        built = _compile_timed(model, config, registry, offline)
        with stage("warmup"):
            for step in built.steps:  # the first run's one-time costs, paid here
                warm_up_partition(step.compiled)
            wait_for_prefault()  # a prefault no partition waited for: its block goes back to the heap
    built.build_times = dict(times)
    if built.config.on_overflow == "fallback" and not offline:
        built.source, built.registry = model, registry  # an fp16 overflow may rebuild it (compiler.overflow)
    return built


def _compile_timed(model: Any, config: ScheduleConfig | None, registry: Registry, offline: bool) -> CompiledModel:
    if offline:  # an offline model from ``nnrt compile`` / ``Session.save``
        with stage("load"):
            return load_compiled(model, config, registry)
    from nnrt_core.compiler.backends import select_backends  # the source-model stages: not for session files
    from nnrt_core.compiler.from_source import build_from_source

    config = config if config is not None else ScheduleConfig()
    events = EventLog()
    choice = None
    if config.cache_dir is not None and may_measure(config):  # a stored measured choice: only its backends imported
        with stage("cache"):
            choice = open_choice(model, config, registry)
            entry = choice.entry(config, registry) if choice is not None else None
            if entry is not None and choice is not None:
                cached, _ = _load_cached(choice.cache, entry, config, registry)
                if cached is not None:
                    return cached
    with stage("select"):
        selection = select_backends(config, registry, events)
        for b in selection.candidates:  # e.g. warm-up work started on a thread while the model loads
            prepare_build(b, config.backend_options.get(b.name))
    with stage("cache"):
        cache, key = _open_cache(model, config, selection, events, None if choice is None else choice.digest)
        why = "miss"
        if cache is not None:
            cached, why = _load_cached(cache, key, config, registry)
            if cached is not None:
                return cached
    built = build_from_source(model, config, registry, selection, events)
    if cache is not None and why.startswith("newer"):  # not ours to overwrite
        built.events.add("cache_disabled", "-", f"model cache entry {str(cache.path(key))!r} not used and left "
                         f"as it is ({why}); the session was built without the cache")
    elif cache is not None:
        built.cache_path = str(cache.path(key))
        with stage("cache"):
            stored = _store_cached(built, cache, key)
            if stored and choice is not None and any(p.get("source") == "measured" for p in built.considered_plans):
                choice.store(built, key)
        if why != "miss":  # after storing: the entry does not keep the event
            built.events.add("cache_rebuilt", "-", f"model cache entry {built.cache_path!r} was not used "
                             f"({why}); the session was built from the model and the entry "
                             + ("rewritten" if stored else "could not be rewritten (see cache_disabled)"))
    return built


def load_compiled(source: Any, config: ScheduleConfig | None, registry: Registry) -> CompiledModel:
    """A compiled model from session-file bytes or a path; its stored config
    applies unless ``config`` is given."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        image = decode(source, what="session bytes")
    else:
        image = read_session_file(source)
    if config is None:
        config = stored_config(image)
    return from_image(image, config, registry)


# ------------------------------------------------------------------ the cache
def _open_cache(model: Any, config: ScheduleConfig, selection: BackendSelection,
                events: EventLog, digest: str | None = None) -> tuple[ModelCache | None, str]:
    """The cache and the entry's key (``digest``: the model's, when known already)."""
    if config.cache_dir is None:
        return None, ""
    from nnrt_core.frontends import model_digest
    from nnrt_core.storage.model_cache import ModelCache  # only sessions with a cache folder use it
    cache = ModelCache(config.cache_dir, config.cache_version)  # ConfigError if a file; unwritable: not written
    digest = digest if digest is not None else model_digest(model)
    if digest is None:
        events.add("cache_disabled", "-", "model cache skipped: this model cannot be keyed")
        return None, ""
    try:
        backends = [b.cache_fingerprint() for b in selection.candidates]
    except Exception as e:  # a buggy plugin: run without a cache rather than fail
        events.add("cache_disabled", "-", f"model cache skipped: a backend's cache_fingerprint() raised "
                                          f"{type(e).__name__}: {e}")
        return None, ""
    compiled_by = {k: v for k, v in config.to_dict().items() if k not in RUNTIME_OPTIONS}
    return cache, cache.key(digest, compiled_by, backends)


def _load_cached(cache: ModelCache, key: str, config: ScheduleConfig,
                 registry: Registry) -> tuple[CompiledModel | None, str]:
    """(the cached model, "hit") or (``None``, why it is rebuilt)."""
    image, why = cache.load(key)
    path = str(cache.path(key))
    if image is None:
        log.info("model cache %s: %s", path, why)
        return None, why
    try:
        loaded = from_image(image, _as_stored_plan(config, image.config), registry)
    except Exception as e:  # any entry that cannot be loaded (a blob the backend now refuses...): rebuild
        problem = str(e) if isinstance(e, NnrtError) else f"{type(e).__name__}: {e}"
        log.warning("model cache: cannot load %s (%s); rebuilding", path, problem)
        return None, f"cannot be loaded: {problem}"
    loaded.cache_hit, loaded.cache_path = True, path
    return loaded, "hit"


def _as_stored_plan(config: ScheduleConfig, stored: dict[str, Any]) -> ScheduleConfig:
    """``config`` with the backends, scheduler and precision of the plan a cache entry
    holds: a measured build stores its winner's (nnrt_core.compiler.measure),
    and the loaded session plans new input shapes with those, not by measuring again."""
    if (config.scheduler not in (AUTO, "measured") and config.precision != AUTO) or not isinstance(stored, dict):
        return config
    backends, scheduler, precision = stored.get("backends"), stored.get("scheduler"), stored.get("precision")
    if not isinstance(scheduler, str) or not isinstance(precision, str) or not (backends == "auto" or (
            isinstance(backends, list) and all(isinstance(b, str) for b in backends))):
        return config
    try:
        return config.replace(backends=backends if backends == "auto" else tuple(backends), scheduler=scheduler,
                              precision=precision)
    except ConfigError:  # a stored value this release does not accept: the entry is rebuilt
        return config


def _store_cached(built: CompiledModel, cache: ModelCache, key: str) -> bool:
    """Write ``built`` to the cache; ``False`` (and a ``cache_disabled`` event) when it cannot be."""
    try:
        image = to_image(built)
    except SessionFileError as e:
        built.events.add("cache_disabled", "-", f"model cache not written: {e}")
        return False
    problem = cache.store(key, image)
    if problem is not None:
        built.events.add("cache_disabled", "-", f"model cache not written ({problem}); running without a cache")
        return False
    return True
