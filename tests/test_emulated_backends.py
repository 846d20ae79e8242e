"""Emulated backends known from distribution metadata (``nnrt.emulated_backends``):
``backends="auto"`` leaves them out without importing their plugin, and a
plugin whose metadata and class disagree is told so."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from importlib import metadata

import pytest

from conftest import builtin_entry_points
from fakes import make_fake_backend
from nnrt_core import ScheduleConfig
from nnrt_core.compiler.build import compile_model
from nnrt_core.hookspec import hookimpl
from nnrt_core.registry import BACKEND_GROUP, EMULATED_GROUP, Registry
from test_partitioning import chain

PLUGIN = "nnrt_test_plugin_emu"
REINSTALL = ("nnrt-backend-npu-emu's metadata lacks its nnrt.emulated_backends entry point: installed before it "
             "was added? re-run pip install -e plugins/npu_emu")


@pytest.fixture
def emu_plugin():
    """``add(emulated_class, declared)``: a backend plugin module ``nnrt_test_plugin_emu``
    (entry point and backend ``emu``), declared in ``nnrt.emulated_backends`` or not;
    returns the registry's entry-point source.  The module is imported only through the registry."""
    def add(emulated: bool, declared: bool, **attrs):
        cls = make_fake_backend("emu", ["Relu", "Neg"], priority=100, emulated=emulated, **attrs)

        @hookimpl
        def nnrt_backends():
            return [cls]

        def import_hook(*_):
            mod = types.ModuleType(PLUGIN)
            mod.nnrt_backends = nnrt_backends
            sys.modules[PLUGIN] = mod
            return mod

        eps = {BACKEND_GROUP: [_EntryPoint("emu", PLUGIN, BACKEND_GROUP, import_hook)]}
        if declared:
            eps[EMULATED_GROUP] = [metadata.EntryPoint(name="emu", value=f"{PLUGIN}:Emu", group=EMULATED_GROUP)]
        return lambda group: builtin_entry_points(group) + eps.get(group, [])

    yield add
    sys.modules.pop(PLUGIN, None)


class _EntryPoint:
    """An entry point whose ``load`` makes the plugin module (so a test can tell whether it was imported)."""

    def __init__(self, name, value, group, load):
        self.name, self.value, self.group, self.dist, self._load = name, value, group, None, load

    def load(self):
        return self._load()


def test_auto_does_not_import_a_declared_emulated_plugin(emu_plugin):
    reg = Registry(entry_points=emu_plugin(emulated=True, declared=True), env={})
    built = compile_model(chain("Relu", "Neg"), ScheduleConfig(), reg)  # backends="auto"
    assert PLUGIN not in sys.modules  # known emulated from metadata: never imported
    assert set(p.backend for p in built.partitions) == {"numpy"}
    skipped = [e for e in built.events if e.kind == "backend_skipped"]
    assert [e.backend for e in skipped] == ["emu"] and "name it in backends" in skipped[0].message
    assert reg.emulated_backends() == ["emu"] and PLUGIN not in sys.modules
    named = compile_model(chain("Relu", "Neg"), ScheduleConfig(backends=["emu"], backup="numpy"), reg)
    assert PLUGIN in sys.modules and {p.backend for p in named.partitions} == {"emu"}  # named: imported, used


def test_declared_emulated_but_class_says_not_is_an_error(emu_plugin):
    reg = Registry(entry_points=emu_plugin(emulated=False, declared=True), env={})
    rec = reg.backend("emu")
    assert not rec.available
    assert EMULATED_GROUP in rec.reason and "emulated = False" in rec.reason and "agree" in rec.reason
    built = compile_model(chain("Relu", "Neg"), ScheduleConfig(backends=["emu"], backup="numpy"), reg)
    unavailable = [e for e in built.events if e.kind == "backend_unavailable"]
    assert unavailable and EMULATED_GROUP in unavailable[0].message
    assert {p.backend for p in built.partitions} == {"numpy"}


def test_emulated_class_not_declared_is_left_out_of_auto_after_importing_it(emu_plugin):
    """The safe side: a plugin that says emulated only in its class is imported by
    ``backends="auto"`` (to learn it) and left out, visibly."""
    reg = Registry(entry_points=emu_plugin(emulated=True, declared=False), env={})
    built = compile_model(chain("Relu", "Neg"), ScheduleConfig(), reg)
    assert PLUGIN in sys.modules
    assert {p.backend for p in built.partitions} == {"numpy"}
    assert [e.backend for e in built.events if e.kind == "backend_skipped"] == ["emu"]
    assert reg.backend("emu").available


def test_real_backend_not_declared_is_used_by_auto(emu_plugin):
    reg = Registry(entry_points=emu_plugin(emulated=False, declared=False), env={})
    built = compile_model(chain("Relu", "Neg"), ScheduleConfig(), reg)
    assert {p.backend for p in built.partitions} == {"emu"}
    assert not [e for e in built.events if e.kind == "backend_skipped"]


def test_installed_emulated_declarations_agree_with_their_classes():
    """Every ``nnrt.emulated_backends`` entry point installed names a backend
    class of that name that says ``emulated`` (the NPU emulator's, here)."""
    pytest.importorskip("nnrt_npu_emu")
    eps = list(metadata.entry_points(group=EMULATED_GROUP))
    assert any(ep.name == "npu_emu" for ep in eps), REINSTALL
    for ep in eps:
        cls = ep.load()
        assert cls.name == ep.name and cls.emulated is True


CHILD = """
import json, sys
from nnrt_core import Session
from test_partitioning import chain
s = Session(chain("Relu", "Neg"))
print(json.dumps({"imported": sorted(m for m in sys.modules if m.startswith("nnrt_npu_emu")),
                  "skipped": [e.backend for e in s.events if e.kind == "backend_skipped"],
                  "placed": sorted(set(s.placement.values()))}))
"""


def test_auto_session_does_not_import_the_npu_emulator():
    pytest.importorskip("nnrt_npu_emu")
    assert any(ep.name == "npu_emu" for ep in metadata.entry_points(group=EMULATED_GROUP)), REINSTALL
    tests = str(__import__("pathlib").Path(__file__).resolve().parent)
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {tests!r})\n" + CHILD],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["imported"] == []  # the plugin and its backend module alike
    assert got["skipped"] == ["npu_emu"] and "npu_emu" not in got["placed"]
