"""The measured choice found again without importing every engine
(nnrt_core/compiler/stored_choice.py): a second process with the same
cache_dir imports only the backends of the stored plan, times nothing and
loads the entry; any change it cannot vouch for takes the ordinary path."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import nnrt_core.compiler.measure as measure
import nnrt_core.compiler.stored_choice as stored_choice
from nnrt_core import ScheduleConfig, Session
from nnrt_core.entry_points import Dist, EntryPointInfo, entry_points
from nnrt_core.registry import BACKEND_GROUP, SCHEDULER_GROUP, Registry
from test_partitioning import X, chain

pytest.importorskip("nnrt_onnxruntime")
REAL = {"numpy", "onnxruntime", "priority"}


def _registry(env=None) -> Registry:
    """numpy (backup), onnxruntime and the slow decoy engine, all found by entry point (as installed)."""
    found = [ep for ep in entry_points((BACKEND_GROUP, SCHEDULER_GROUP)) if ep.name in REAL]
    found.append(EntryPointInfo("decoy", "decoy_engine:plugin", BACKEND_GROUP, Dist("nnrt-test-decoy", "1.0")))
    return Registry(entry_points=lambda group: [ep for ep in found if ep.group == group], env=env or {})


def _no_timing(monkeypatch) -> list:
    timed: list = []
    monkeypatch.setattr(measure, "_time_plans", lambda *a: timed.append(a) or [])
    return timed


def _first(tmp_path):
    cfg = ScheduleConfig(cache_dir=str(tmp_path))  # backends="auto", scheduler="auto": two real engines measure
    m = chain("Relu", "Neg", "Abs")
    first = Session(m, cfg, registry=_registry())
    assert not first.compiled_model.cache_hit and {p.backend for p in first.partitions} == {"onnxruntime"}
    assert any(p["label"] == "decoy alone" for p in first.considered_plans)
    return m, cfg, first


def test_a_second_build_imports_only_the_chosen_engine_and_times_nothing(tmp_path, monkeypatch):
    m, cfg, first = _first(tmp_path)
    assert len(list(tmp_path.glob("*" + stored_choice.CHOICE_SUFFIX))) == 1
    timed = _no_timing(monkeypatch)
    reg = _registry()  # a fresh process: nothing imported yet
    second = Session(m, cfg, registry=reg)
    assert second.compiled_model.cache_hit and not timed
    assert "decoy" not in reg.loaded_plugins() and "onnxruntime" in reg.loaded_plugins()
    assert second.placement == first.placement and second.config.backends == first.config.backends
    assert second.considered_plans == first.considered_plans  # what was measured is still reported
    np.testing.assert_allclose(second.run(X)["y"], first.run(X)["y"])


@pytest.mark.parametrize("damage", ["garbage", "escape", "fingerprint", "oversized", "fifo"])
def test_a_record_it_cannot_vouch_for_takes_the_ordinary_path(tmp_path, monkeypatch, damage):
    m, cfg, first = _first(tmp_path)
    (path,) = tmp_path.glob("*" + stored_choice.CHOICE_SUFFIX)
    record = json.loads(path.read_text())
    if damage == "garbage":
        path.write_bytes(b"\x00not json")
    elif damage == "escape":  # an entry name that is not a key (a path out of the folder) is never opened
        path.write_text(json.dumps({**record, "entry": "../../etc/passwd"}))
    elif damage == "fingerprint":  # the engine changed since: its record does not hold
        path.write_text(json.dumps({**record, "backends": {"onnxruntime": {"version": "0.0"}}}))
    elif damage == "fifo":  # never opened for a blocking read
        path.unlink()
        os.mkfifo(path)
    else:
        path.write_bytes(b" " * (stored_choice.MAX_RECORD_BYTES + 1))
    timed = _no_timing(monkeypatch)
    reg = _registry()
    second = Session(m, cfg, registry=reg)
    assert second.compiled_model.cache_hit and not timed  # the entry is still found by its full key
    assert "decoy" in reg.loaded_plugins()  # ... after selecting and fingerprinting every engine


def test_an_installed_package_that_changes_is_a_different_choice_key(tmp_path, monkeypatch):
    m, cfg, _ = _first(tmp_path)
    real = stored_choice.installed_distributions
    monkeypatch.setattr(stored_choice, "installed_distributions", lambda: real() + ["openvino-9999.0.dist-info"])
    reg = _registry()
    second = Session(m, cfg, registry=reg)
    assert second.compiled_model.cache_hit and "decoy" in reg.loaded_plugins()  # no record for this key


def test_no_record_without_identifiable_plugins(tmp_path):
    from conftest import make_registry
    from decoy_engine import plugin
    from nnrt_core.compiler.stored_choice import choice_key
    from nnrt_core.storage.model_cache import ModelCache

    reg = make_registry(plugin)  # a programmatic plugin: nothing identifies it before it is imported
    assert reg.discovery_fingerprint() is None
    assert choice_key(ModelCache(tmp_path, 1), "digest", ScheduleConfig(), reg) is None
    assert _registry().discovery_fingerprint() is not None
    assert _registry({"NNRT_BLOCK_PLUGINS": "decoy"}).discovery_fingerprint() != _registry().discovery_fingerprint()
