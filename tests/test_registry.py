"""Plugin discovery through entry points: broken, blocked, duplicate, disabled."""
from __future__ import annotations

import sys
import types
from importlib import metadata

import pytest

from conftest import builtin_entry_points, make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core.errors import ConfigError, PluginError
from nnrt_core.registry import BACKEND_GROUP, Registry


def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod


@pytest.fixture
def extra_eps(monkeypatch):
    """Entry points = the builtin ones + test modules registered here."""
    extra: dict[str, list[metadata.EntryPoint]] = {}

    def add(group: str, name: str, value: str) -> None:
        extra.setdefault(group, []).append(metadata.EntryPoint(name=name, value=value, group=group))

    def source(group: str):
        return builtin_entry_points(group) + extra.get(group, [])

    add.source = source  # type: ignore[attr-defined]
    yield add
    for mod in [m for m in sys.modules if m.startswith("nnrt_test_plugin")]:
        del sys.modules[mod]


def test_builtin_plugins_load_through_entry_points():
    reg = Registry(entry_points=builtin_entry_points, env={})
    assert reg.backend("numpy").available
    assert reg.backend("numpy").plugin == "numpy"
    assert "priority" in reg.schedulers
    names = {(p.name, p.group, p.status) for p in reg.plugin_records}
    assert ("numpy", BACKEND_GROUP, "loaded") in names


def test_real_entry_points_include_numpy_distribution():
    eps = {ep.name: ep for ep in metadata.entry_points(group=BACKEND_GROUP)}
    assert eps["numpy"].dist.name == "nnrt-backend-numpy"


def test_broken_import_is_listed_not_fatal(extra_eps):
    extra_eps(BACKEND_GROUP, "broken", "nnrt_test_plugin_does_not_exist")
    reg = Registry(entry_points=extra_eps.source, env={})
    rec = next(p for p in reg.plugin_records if p.name == "broken")
    assert rec.status == "failed" and "import failed" in rec.reason
    assert reg.backend("numpy").available


def test_backend_failing_to_initialize_is_unavailable(extra_eps):
    class Exploding(make_fake_backend("exploding", ["Relu"])):
        def __init__(self):
            raise RuntimeError("driver not found")

    from nnrt_core.hookspec import hookimpl

    @hookimpl
    def nnrt_backends():
        return [Exploding]

    _module("nnrt_test_plugin_exploding", nnrt_backends=nnrt_backends)
    extra_eps(BACKEND_GROUP, "exploding", "nnrt_test_plugin_exploding")
    reg = Registry(entry_points=extra_eps.source, env={})
    rec = reg.backend("exploding")
    assert not rec.available and "driver not found" in rec.reason
    assert [r.name for r in reg.available_backends()] == ["numpy"]


def test_hook_raising_marks_plugin_failed():
    class Bad:
        from nnrt_core.hookspec import hookimpl

        @hookimpl
        def nnrt_backends(self):
            raise ImportError("needs libfoo")

    reg = make_registry(Bad())
    rec = next(p for p in reg.plugin_records if p.name == "test0")
    assert rec.status == "failed" and "libfoo" in rec.reason


def test_unavailable_backend_reports_reason():
    reg = make_registry(fake_plugin(make_fake_backend("ghost", ["Relu"], unavailable="no device attached")))
    assert reg.backend("ghost").reason == "no device attached"
    assert reg.backend("ghost").to_dict()["available"] is False


def test_blocked_plugin(extra_eps):
    extra_eps(BACKEND_GROUP, "broken", "nnrt_test_plugin_does_not_exist")
    reg = Registry(entry_points=extra_eps.source, env={"NNRT_BLOCK_PLUGINS": "broken, other"})
    rec = next(p for p in reg.plugin_records if p.name == "broken")
    assert rec.status == "blocked"


def test_autoload_disabled_keeps_embedded_plugins(extra_eps):
    extra_eps(BACKEND_GROUP, "broken", "nnrt_test_plugin_does_not_exist")
    reg = Registry(entry_points=extra_eps.source, env={"NNRT_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert next(p for p in reg.plugin_records if p.name == "broken").status == "disabled"
    assert reg.backend("numpy").available and "priority" in reg.schedulers


def test_duplicate_backend_names_are_an_error():
    a = make_fake_backend("twin", ["Relu"])
    b = make_fake_backend("twin", ["Add"])
    with pytest.raises(PluginError, match="'twin' is provided by two plugins"):
        make_registry(fake_plugin(a), fake_plugin(b))


def test_unknown_backend_lists_installed():
    reg = make_registry(fake_plugin(make_fake_backend("npuA", ["Relu"])))
    with pytest.raises(ConfigError, match="unknown backend 'nope'; installed backends: npuA, numpy"):
        reg.backend("nope")
    with pytest.raises(ConfigError, match="installed schedulers: measured, priority"):
        reg.scheduler("fastest")
