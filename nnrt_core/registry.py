"""Plugin discovery: a pluggy ``PluginManager`` fed from entry points.

Backends come from the ``nnrt.backends`` entry-point group and schedulers from
``nnrt.schedulers``.  The built-in ones (the NumPy backend, the priority
scheduler) are ordinary distributions registered through the same groups.
A distribution names its emulated backends in ``nnrt.emulated_backends``
(entry-point name = backend name): ``backends="auto"`` leaves them out
without importing their plugin (:meth:`Registry.emulated_backends`); the
backend class's ``emulated`` must agree (:func:`emulated_problem`).

A plugin that fails to import (anything raised, ``SystemExit`` included) or
whose backend fails to initialize or declares attributes of the wrong types
(:func:`trait_problem`) is recorded as unavailable with the reason and a log
line; it never breaks the runtime or the other backends.  Two plugins that
offer one backend name: one is kept by :func:`precedence` (built-ins first,
then the entry point named like the backend, then distribution and
entry-point name), the other is listed in :attr:`Registry.conflicts` as
unavailable with the reason (``nnrt devices``, a ``backend_unavailable``
event in sessions that select that name).

Environment variables:

``NNRT_DISABLE_PLUGIN_AUTOLOAD=1``
    load only the embedded plugins (``numpy``, ``priority``) and those named in
    ``NNRT_PLUGINS``.
``NNRT_PLUGINS=a,b``
    entry-point names to load even when autoloading is disabled.
``NNRT_BLOCK_PLUGINS=a,b``
    entry-point names never to load (shown as "blocked").
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Iterable, Mapping

import pluggy

from nnrt_core.backend.base import Backend
from nnrt_core.entry_points import EntryPointInfo, entry_points as installed_entry_points
from nnrt_core.config import DEFAULT_BACKUP, DEFAULT_SCHEDULER
from nnrt_core.errors import ConfigError
from nnrt_core.gc_pause import paused_gc
from nnrt_core.hookspec import PROJECT, BackendSpec, FrontendSpec, SchedulerSpec
from nnrt_core.logs import get_logger
from nnrt_core.registry_records import (EMULATED_GROUP, BackendRecord, PluginRecord, SchedulerRecord,
                                       custom_ops_problem, declared_emulated, emulated_problem, trait_problem,
                                       is_plain_int, text_or_empty)

__all__ = [
    "BACKEND_GROUP",
    "SCHEDULER_GROUP",
    "EMULATED_GROUP",
    "EMBEDDED_PLUGINS",
    "PluginRecord",
    "BackendRecord",
    "SchedulerRecord",
    "Registry",
    "default_registry",
    "trait_problem",
    "custom_ops_problem",
    "emulated_problem",
    "precedence",
]

log = get_logger("nnrt.registry")

BACKEND_GROUP = "nnrt.backends"
SCHEDULER_GROUP = "nnrt.schedulers"
#: entry-point names loaded even when autoloading is disabled
EMBEDDED_PLUGINS = frozenset({DEFAULT_BACKUP, DEFAULT_SCHEDULER})  #: the config defaults, always loaded
ENV_DISABLE_AUTOLOAD = "NNRT_DISABLE_PLUGIN_AUTOLOAD"
ENV_PLUGINS = "NNRT_PLUGINS"
ENV_BLOCK = "NNRT_BLOCK_PLUGINS"

EntryPointSource = Callable[[str], Iterable[Any]]  # objects like importlib.metadata.EntryPoint


class Registry:
    """Loaded plugins, backends and schedulers.

    Entry points are read at construction, but a plugin's module is imported
    only when one of its backends or schedulers is asked for by name
    (:meth:`backend`, :meth:`scheduler`, :meth:`find_backend`) or when the
    lists are read (:attr:`backends`, :attr:`schedulers`,
    :attr:`plugin_records`, :meth:`available_backends`; ``backends="auto"``
    skips the plugins declared emulated): a session on one backend imports
    that plugin, the backup's and the scheduler's only.

    ``entry_points`` and ``env`` are injectable for tests; ``plugins`` are
    extra plugin objects registered as if found by entry point (name, object),
    at construction.
    """

    def __init__(self, entry_points: EntryPointSource | None = None, env: Mapping[str, str] | None = None,
                 plugins: list[tuple[str, object]] | None = None) -> None:
        self.entry_points = entry_points
        self.env: Mapping[str, str] = os.environ if env is None else env
        self.plugins: list[tuple[str, object]] = [] if plugins is None else plugins
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(BackendSpec)
        self.pm.add_hookspecs(SchedulerSpec)
        self.pm.add_hookspecs(FrontendSpec)
        self._records: list[PluginRecord] = []
        self._backends: dict[str, BackendRecord] = {}
        self._schedulers: dict[str, SchedulerRecord] = {}
        #: backends not used because another plugin offers the same name (unavailable, with the reason)
        self.conflicts: list[BackendRecord] = []
        self._owners: dict[Any, PluginRecord] = {}  # backend name / ("scheduler", name) -> the plugin kept
        self._pending: dict[str, list[tuple[PluginRecord, Any]]] = {
            BACKEND_GROUP: [], SCHEDULER_GROUP: []}
        self._lock = threading.RLock()  # one thread imports a plugin; the others wait for it
        self._discover()

    # ------------------------------------------------------------- loading
    def _discover(self) -> None:
        """Read the entry points (no plugin imported) and register ``plugins``."""
        if self.entry_points is not None:
            source = self.entry_points
        else:  # one scan of the installed distributions for both groups (see nnrt_core.entry_points)
            found: list[EntryPointInfo] = installed_entry_points((BACKEND_GROUP, SCHEDULER_GROUP, EMULATED_GROUP))
            source = lambda group: [ep for ep in found if ep.group == group]  # noqa: E731
        #: distribution -> the backends it declares emulated (metadata: nothing imported)
        self._emulated = declared_emulated(source(EMULATED_GROUP))
        blocked = _split(self.env.get(ENV_BLOCK, ""))
        autoload = self.env.get(ENV_DISABLE_AUTOLOAD, "") in ("", "0", "false", "False")
        wanted = _split(self.env.get(ENV_PLUGINS, "")) | EMBEDDED_PLUGINS
        for name in blocked:
            self.pm.set_blocked(name)
        for group in (BACKEND_GROUP, SCHEDULER_GROUP):
            for ep in _sorted_unique(source(group)):
                dist = getattr(ep, "dist", None)
                rec = PluginRecord(ep.name, group, getattr(dist, "name", "") or "", getattr(dist, "version", "") or "")
                self._records.append(rec)
                if ep.name in blocked:
                    rec.status, rec.reason = "blocked", f"blocked by {ENV_BLOCK}"
                    log.info("plugin %s blocked by %s", ep.name, ENV_BLOCK)
                elif not autoload and ep.name not in wanted:
                    rec.status, rec.reason = "disabled", f"autoload disabled by {ENV_DISABLE_AUTOLOAD}"
                else:
                    rec.status = "found"
                    self._pending[group].append((rec, ep))
        for name, obj in self.plugins:
            rec = PluginRecord(name, "<programmatic>")
            self._records.append(rec)
            if name in blocked:
                rec.status, rec.reason = "blocked", f"blocked by {ENV_BLOCK}"
                continue
            self._register(rec, obj)

    def _load_pending(self, group: str, name: str | None = None, *, emulated: bool = True) -> None:
        """Import the pending plugins of ``group`` (only the entry point called
        ``name`` when given; not those declared emulated unless ``emulated``)."""
        with self._lock, paused_gc(promote=True):  # plugin imports make no garbage (nnrt_core/gc_pause.py)
            todo = [(r, ep) for r, ep in self._pending[group] if (name is None or ep.name == name)
                    and (emulated or not self._declared_emulated(r))]
            for rec, ep in todo:
                self._pending[group].remove((rec, ep))
                rec.status = "loaded"
                try:
                    obj = ep.load()
                except (Exception, SystemExit) as e:  # a plugin calling sys.exit() on import too
                    rec.status, rec.reason = "failed", f"import failed: {type(e).__name__}: {e}"
                    log.warning("plugin %s (%s) failed to import: %s", ep.name, group, e)
                    continue
                self._register(rec, obj)

    def load_all(self) -> None:
        """Import every pending plugin (listing, ``backends="auto"``)."""
        self._load_pending(BACKEND_GROUP)
        self._load_pending(SCHEDULER_GROUP)

    @property
    def plugin_records(self) -> list[PluginRecord]:
        """Every plugin with its status (imports the pending ones)."""
        self.load_all()
        return self._records

    @property
    def backends(self) -> dict[str, BackendRecord]:
        """Every installed backend by name (imports every backend plugin)."""
        self._load_pending(BACKEND_GROUP)
        return self._backends

    @property
    def schedulers(self) -> dict[str, SchedulerRecord]:
        """Every installed scheduler by name (imports every scheduler plugin)."""
        self._load_pending(SCHEDULER_GROUP)
        return self._schedulers

    def discovery_fingerprint(self) -> list[list[str]] | None:
        """Every plugin as found, unimported: group, name, distribution, version, blocked/disabled or not;
        ``None`` when one was registered programmatically or has no distribution version."""
        out = []
        for r in self._records:
            if r.group == "<programmatic>" or not r.distribution or not r.version:
                return None
            out.append([r.group, r.name, r.distribution, r.version,
                        "off" if r.status in ("blocked", "disabled") else "on"])
        return sorted(out)

    def loaded_plugins(self) -> list[str]:
        """Names of the plugins imported so far (the others are only found)."""
        return [r.name for r in self._records if r.status in ("loaded", "failed") and r.group != "<programmatic>"]

    def _register(self, rec: PluginRecord, obj: object) -> None:
        try:
            if self.pm.is_registered(obj):
                rec.status, rec.reason = "failed", "same plugin object registered under another name"
                return
            self.pm.register(obj, name=rec.name)
        except ValueError as e:  # two entry points of one name (two distributions): the first is kept
            rec.status, rec.reason = "failed", f"plugin name {rec.name!r} is registered twice: {e}"
            log.warning("plugin %s: %s", rec.name, rec.reason)
            return
        except Exception as e:  # pluggy validation error (bad hook signature...)
            rec.status, rec.reason = "failed", f"registration failed: {e}"
            return
        self._collect(rec, obj, "nnrt_backends", self._add_backend)
        self._collect(rec, obj, "nnrt_schedulers", self._add_scheduler)

    def _collect(self, rec: PluginRecord, obj: object, hook: str, add: Callable[[PluginRecord, Any], None]) -> None:
        impls = [i for i in getattr(self.pm.hook, hook).get_hookimpls() if i.plugin is obj]
        for impl in impls:
            try:
                items = list(impl.function() or [])
            except (Exception, SystemExit) as e:
                rec.status, rec.reason = "failed", f"{hook}() raised {type(e).__name__}: {e}"
                log.warning("plugin %s: %s", rec.name, rec.reason)
                continue
            for item in items:
                add(rec, item)

    def _add_backend(self, rec: PluginRecord, cls: Any) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            rec.status, rec.reason = "failed", f"backend {cls!r} has no name"
            return
        priority = getattr(cls, "default_priority", 0)
        br = BackendRecord(name, rec.name, priority=priority if is_plain_int(priority) else 0,
                           version=text_or_empty(getattr(cls, "version", "")),
                           device_type=text_or_empty(getattr(cls, "device_type", "")))
        if name in self._backends and not self._displaces(rec, name):
            self._conflict(br, self._backends[name].plugin)
            return
        if name in self._backends:
            old = self._backends[name]
            old.backend = None
            self._conflict(old, rec.name)
        self._backends[name], self._owners[name] = br, rec
        try:
            backend = cls() if isinstance(cls, type) else cls
            if not isinstance(backend, Backend):
                raise TypeError(f"{type(backend).__name__} is not a nnrt_core.backend.Backend")
        except (Exception, SystemExit) as e:
            br.reason = f"failed to initialize: {type(e).__name__}: {e}"
            log.warning("backend %s (plugin %s) %s", name, rec.name, br.reason)
            return
        br.reason = trait_problem(backend) or emulated_problem(backend, rec, self._declared_emulated(rec, name))
        if br.reason is not None:
            log.warning("backend %s (plugin %s) is unusable: %s", name, rec.name, br.reason)
            return
        br.backend = backend
        br.priority, br.version = int(backend.default_priority), str(backend.version)
        br.reason = backend.availability()
        if br.reason is not None:
            log.info("backend %s is unavailable: %s", name, br.reason)

    def _declared_emulated(self, rec: PluginRecord, backend: str | None = None) -> bool:
        """Whether ``rec``'s distribution declares its entry point (or ``backend``) emulated."""
        names = self._emulated.get(rec.distribution, frozenset()) if rec.group == BACKEND_GROUP else frozenset()
        return rec.name in names or backend in names

    def _displaces(self, rec: PluginRecord, name: str) -> bool:
        """Whether ``rec``'s backend ``name`` goes before the one registered
        (the conflict rule, see :func:`precedence`)."""
        holder = self._owners.get(name)
        return holder is not None and precedence(rec, name) < precedence(holder, name)

    def _conflict(self, loser: BackendRecord, kept: str) -> None:
        """Record backend ``loser`` as unavailable: plugin ``kept`` offers the same name."""
        loser.reason = (f"backend name {loser.name!r} is also offered by plugin {kept!r}, which is kept "
                        f"(built-in plugins first, then the entry point named like the backend, then by "
                        f"distribution and entry-point name); block one with {ENV_BLOCK}")
        self.conflicts.append(loser)
        log.warning("plugin %s: %s", loser.plugin, loser.reason)

    def _add_scheduler(self, rec: PluginRecord, cls: Any) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            rec.status, rec.reason = "failed", f"scheduler {cls!r} has no name"
            return
        holder = self._owners.get(("scheduler", name))
        if holder is not None:  # the rule of backends (precedence) decides which one stays
            kept, loser = (rec, holder) if precedence(rec, name) < precedence(holder, name) else (holder, rec)
            loser.reason = f"scheduler name {name!r} is also offered by plugin {kept.name!r}, which is kept"
            log.warning("plugin %s: %s", loser.name, loser.reason)
            if kept is holder:
                return
        self._owners[("scheduler", name)] = rec
        self._schedulers[name] = SchedulerRecord(name, rec.name, cls, getattr(cls, "description", ""))

    # -------------------------------------------------------------- queries
    def find_backend(self, name: str) -> BackendRecord | None:
        """The record of backend ``name``, or ``None``: imports the plugin whose
        entry point has that name first, every backend plugin only if needed."""
        self._load_outranking(BACKEND_GROUP, name)
        if name not in self._backends:
            self._load_pending(BACKEND_GROUP)  # a plugin may name its backend differently
        return self._backends.get(name)

    def _load_outranking(self, group: str, name: str) -> None:
        """Import the pending plugins that would keep ``name`` over any other
        (:func:`precedence`): the built-in ones and the entry point called ``name``."""
        for wanted in (*sorted(EMBEDDED_PLUGINS), name):
            if any(ep.name == wanted for _, ep in self._pending[group]):
                self._load_pending(group, wanted)

    def backend(self, name: str) -> BackendRecord:
        """The record of an installed backend; :class:`ConfigError` listing the
        installed ones when ``name`` is unknown."""
        rec = self.find_backend(name)
        if rec is None:
            installed = ", ".join(sorted(self.backends)) or "none"
            failed = [p for p in self.plugin_records if p.group == BACKEND_GROUP and p.name == name and p.reason]
            if failed:  # its plugin is installed but failed to load (e.g. its engine is missing): say why
                raise ConfigError(f"backend {name!r} is not usable: its plugin failed to load: {failed[0].reason}; "
                                  f"installed backends: {installed}")
            raise ConfigError(f"unknown backend {name!r}; installed backends: {installed}")
        return rec

    def available_backends(self, *, emulated: bool = True) -> list[BackendRecord]:
        """Available backends, highest default priority first (imports every
        backend plugin); without the emulated ones when not ``emulated``
        (then the plugins declared emulated are not imported)."""
        self._load_pending(BACKEND_GROUP, emulated=emulated)
        recs = [r for r in self._backends.values() if r.available and (emulated or not _is_emulated(r))]
        return sorted(recs, key=lambda r: (-r.priority, r.name))

    def loaded_backends(self) -> dict[str, BackendRecord]:
        """The backends of the plugins imported so far, by name (imports nothing)."""
        return dict(self._backends)

    def emulated_backends(self) -> list[str]:
        """The names of the emulated backends, what ``backends="auto"`` leaves
        out: the pending plugins whose entry point their distribution declares
        emulated (not imported for this) and the imported available backends
        whose class says ``emulated`` (every backend plugin not declared
        emulated is imported to tell)."""
        self._load_pending(BACKEND_GROUP, emulated=False)
        names = {n for n, r in self._backends.items() if r.available and _is_emulated(r)}
        names |= {rec.name for rec, _ in self._pending[BACKEND_GROUP] if self._declared_emulated(rec)}
        return sorted(names)

    def host_evaluator(self) -> Backend | None:
        """The first available backend (by priority) that declares
        ``evaluates_constants``: it folds constants and runs calibration."""
        for rec in self.available_backends():
            if rec.backend is not None and rec.backend.evaluates_constants:
                return rec.backend
        return None

    def tflite_custom_ops(self) -> tuple[dict[str, Callable[[Any], None]], list[str]]:
        """The TFLite custom-operator mappers the loaded plugins claim
        (``nnrt_tflite_custom_ops``), and one line per plugin whose answer was
        refused (it raised, returned no mapping, or a name claimed twice).
        Imports every pending plugin: asked only for a model with unclaimed custom operators."""
        self.load_all()
        mappers: dict[str, Callable[[Any], None]] = {}
        owners: dict[str, str] = {}
        problems: list[str] = []
        for impl in self.pm.hook.nnrt_tflite_custom_ops.get_hookimpls():
            name = self.pm.get_name(impl.plugin) or repr(impl.plugin)
            try:
                answer = impl.function()
            except (Exception, SystemExit) as e:
                problems.append(f"plugin {name!r}: nnrt_tflite_custom_ops() raised {type(e).__name__}: {e}")
                log.warning("%s", problems[-1])
                continue
            problem = custom_ops_problem(answer, owners, name)
            if problem is not None:
                problems.append(f"plugin {name!r}: nnrt_tflite_custom_ops() {problem}; ignored")
                log.warning("%s", problems[-1])
                continue
            mappers.update(answer)
            owners.update(dict.fromkeys(answer, name))
        return mappers, problems

    def scheduler(self, name: str) -> SchedulerRecord:
        """The scheduler ``name`` (imports its plugin; every scheduler plugin
        only if no entry point has that name); :class:`ConfigError` listing
        the installed ones when unknown."""
        self._load_outranking(SCHEDULER_GROUP, name)
        if name not in self._schedulers:
            self._load_pending(SCHEDULER_GROUP)
        try:
            return self._schedulers[name]
        except KeyError:
            installed = ", ".join(sorted(self._schedulers)) or "none"
            raise ConfigError(f"unknown scheduler {name!r}; installed schedulers: {installed}") from None


def precedence(rec: PluginRecord, backend: str) -> tuple[bool, bool, str, str]:
    """The order in which plugins offering the same backend name are kept
    (lowest first, whatever the import order): the built-in plugins, then the
    one whose entry point is named like the backend, then by distribution
    name, then by entry-point name."""
    return rec.name not in EMBEDDED_PLUGINS, rec.name != backend, rec.distribution, rec.name


def _is_emulated(rec: BackendRecord) -> bool:
    return rec.backend is not None and bool(rec.backend.emulated)


def _split(text: str) -> set[str]:
    return {p.strip() for p in text.split(",") if p.strip()}


def _sorted_unique(eps: Iterable[Any]) -> list[Any]:
    seen: dict[tuple[str, str], Any] = {}
    for ep in eps:  # the same distribution can be visible twice on odd sys.paths
        seen.setdefault((ep.name, ep.value), ep)
    return sorted(seen.values(), key=lambda ep: (ep.name, getattr(getattr(ep, "dist", None), "name", "") or ""))


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry(*, reload: bool = False) -> Registry:
    """The process-wide registry, loaded on first use."""
    global _default
    with _default_lock:
        if _default is None or reload:
            _default = Registry()
        return _default
