"""The ONNX Runtime backend's cold-start shortcuts (docs/plugins.md, "Cold
start"): the IR version cap read from a table for known releases (and the
table checked against a probe), probing for any other release."""
from __future__ import annotations

import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("nnrt_onnxruntime")

from nnrt_core.frontends.onnx.onnx_lite import P  # noqa: E402
from nnrt_onnxruntime import export  # noqa: E402


@pytest.fixture
def fresh_cap():
    """``max_ir_version`` recomputed in the test and forgotten after it."""
    export.max_ir_version.cache_clear()
    yield
    export.max_ir_version.cache_clear()


def test_the_table_agrees_with_a_probe_of_the_installed_release(fresh_cap):
    probed = export.probe_ir_version()
    assert 7 <= probed <= P.IR_VERSION
    assert export.max_ir_version() == probed  # from the table when listed, probed otherwise: the same answer


def test_a_listed_release_is_not_probed(fresh_cap, monkeypatch):
    monkeypatch.setattr(export, "ort_release", lambda: (1, 32))
    monkeypatch.setattr(export, "probe_ir_version", lambda: pytest.fail("a listed release was probed"))
    assert export.max_ir_version() == min(export.KNOWN_IR_VERSIONS[(1, 32)], P.IR_VERSION)


def test_an_unlisted_release_is_probed_once(fresh_cap, monkeypatch):
    calls = []
    monkeypatch.setattr(export, "ort_release", lambda: (9, 99))
    monkeypatch.setattr(export, "probe_ir_version", lambda: calls.append(1) or 9)
    assert export.max_ir_version() == 9
    assert export.max_ir_version() == 9
    assert calls == [1]


def test_the_table_never_exceeds_what_the_exporter_writes(fresh_cap, monkeypatch):
    monkeypatch.setattr(export, "KNOWN_IR_VERSIONS", {(1, 32): P.IR_VERSION + 5})
    monkeypatch.setattr(export, "ort_release", lambda: (1, 32))
    assert export.max_ir_version() == P.IR_VERSION


@pytest.mark.parametrize("version, want", [("1.32.0", (1, 32)), ("1.33.0.dev20260101", (1, 33)), ("2.x", (2,))])
def test_release_parsing(monkeypatch, version, want):
    monkeypatch.setattr(ort, "__version__", version)
    assert export.ort_release() == want
