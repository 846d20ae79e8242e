"""Shared fixtures: the onnx package's real models and registries with fakes."""
from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

import onnx
import pytest

from nnrt_core.registry import Registry

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
# examples/light_weights.py (informative weights for the light models) is shared with the demo and benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
BUILTIN = {"numpy", "priority"}


def builtin_entry_points(group: str):
    """Only the embedded plugins (numpy backend, priority scheduler), whatever
    else is installed, so tests are deterministic."""
    return [ep for ep in metadata.entry_points(group=group) if ep.name in BUILTIN]


def make_registry(*plugins, env=None) -> Registry:
    return Registry(entry_points=builtin_entry_points, env=env or {},
                    plugins=[(f"test{i}", p) for i, p in enumerate(plugins)])


@pytest.fixture
def light_dir() -> Path:
    if not LIGHT_DIR.is_dir():  # pragma: no cover
        pytest.skip("onnx wheel without light models")
    return LIGHT_DIR


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "nnrt-cache"
    monkeypatch.setenv("NNRT_CACHE_DIR", os.environ.get("NNRT_TEST_CACHE_DIR", str(cache)))


