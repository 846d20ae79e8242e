"""nnrt_core.entry_points answers what importlib.metadata answers, on the
installed environment and on made-up sys.path layouts."""
from __future__ import annotations

import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from nnrt_core import entry_points as ep_mod
from nnrt_core.entry_points import entry_points
from nnrt_core.registry import BACKEND_GROUP, EMULATED_GROUP, SCHEDULER_GROUP

GROUPS = (BACKEND_GROUP, SCHEDULER_GROUP, EMULATED_GROUP)


def _ours(groups=GROUPS) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {g: [] for g in groups}
    for ep in entry_points(groups):
        out[ep.group].append((ep.name, ep.value, ep.dist.name if ep.dist else None,
                              ep.dist.version if ep.dist else None))
    return {g: sorted(v) for g, v in out.items()}


def _importlib(groups=GROUPS) -> dict[str, list[tuple]]:
    found = metadata.entry_points()
    return {g: sorted((ep.name, ep.value, ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None)
                      for ep in found.select(group=g)) for g in groups}


def test_installed_entry_points_match_importlib_metadata():
    ours = _ours()
    assert ours == _importlib()
    assert ours[BACKEND_GROUP], "the built-in backends are installed"


def _dist(folder: Path, dirname: str, name: str, version: str, entry_points_txt: str) -> None:
    d = folder / dirname
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-a-header\n")
    (d / "entry_points.txt").write_text(entry_points_txt)


def test_made_up_sys_path_matches_importlib_metadata(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    _dist(a, "Alpha_Plugin-1.0.dist-info", "Alpha-Plugin", "1.0",
          "# a comment\n[nnrt.backends]\n  alpha = alpha_mod:make [extra]\n\n[console_scripts]\nx = y:z\n")
    # the same distribution again, later on sys.path: importlib.metadata keeps the first
    _dist(b, "alpha.plugin-2.0.dist-info", "alpha.plugin", "2.0", "[nnrt.backends]\nalpha2 = other:thing\n")
    _dist(b, "beta-0.1.egg-info", "beta", "0.1", "[nnrt.schedulers]\nbeta=beta_mod:Sched.inner\n")
    _dist(b, "gamma-3.dist-info", "gamma", "3", "[other.group]\ng = g:g\n")
    (b / "no_entry_points-1.dist-info").mkdir()
    monkeypatch.setattr(sys, "path", [str(a), str(tmp_path / "missing"), str(b)])
    ours = _ours()
    assert ours == _importlib()
    monkeypatch.setattr(sys, "path", [str(a), b"not-a-str", str(b)])  # importlib.metadata raises on it
    assert _ours() == ours
    assert ours[BACKEND_GROUP] == [("alpha", "alpha_mod:make [extra]", "Alpha-Plugin", "1.0")]
    assert ours[SCHEDULER_GROUP] == [("beta", "beta_mod:Sched.inner", "beta", "0.1")]


def test_a_zip_on_sys_path_is_read_by_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        z.writestr("zipped-1.0.dist-info/entry_points.txt", "[nnrt.backends]\nzipped = zipped_mod:x\n")
    monkeypatch.setattr(sys, "path", [str(archive)])
    asked = []
    real = ep_mod._from_importlib
    monkeypatch.setattr(ep_mod, "_from_importlib", lambda groups: asked.append(groups) or real(groups))
    assert _ours()[BACKEND_GROUP] == [("zipped", "zipped_mod:x", "zipped", "1.0")]
    assert asked, "the zip was left to importlib.metadata"


def test_load_imports_the_module_and_walks_the_attributes(tmp_path, monkeypatch):
    (tmp_path / "ep_probe_mod.py").write_text("class Outer:\n    class Inner:\n        value = 42\n")
    _dist(tmp_path, "probe-1.dist-info", "probe", "1",
          "[nnrt.backends]\nprobe = ep_probe_mod:Outer.Inner\nbad = not valid!\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    eps = {ep.name: ep for ep in entry_points([BACKEND_GROUP])}
    assert eps["probe"].load().value == 42
    with pytest.raises(ValueError, match="invalid value"):
        eps["bad"].load()
    monkeypatch.delitem(sys.modules, "ep_probe_mod", raising=False)
