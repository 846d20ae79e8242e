"""The backup backend is asked about the nodes only when its answer is read
(:class:`nnrt_core.placement.deferred.DeferredCapability`): the placement
report, the events and the fallbacks stay what asking it first gives."""
from __future__ import annotations

import copy
import pickle
import threading
from typing import Any

import numpy as np
import pytest

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.backend import Capability
from nnrt_core.compiler import place
from nnrt_core.errors import ConfigError, UnsupportedNodeError
from nnrt_core.placement.deferred import DeferredCapability
from test_lazy_loading import ORT_SESSION, _python
from test_plugin_faults import EXPECTED, X, chain


def _asked(calls: list[int], cap: Capability) -> Any:
    def compute() -> Capability:
        calls.append(1)
        return cap
    return compute


def test_deferred_capability_is_computed_once_on_first_read():
    calls: list[int] = []
    plain = Capability("b", {"n1"}, {"n2": "no kernel"})
    cap = DeferredCapability("b", _asked(calls, Capability("b", {"n1"}, {"n2": "no kernel"})))
    assert cap.pending and cap.backend == "b" and calls == []
    threads = [threading.Thread(target=cap.supports, args=("n1",)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and not cap.pending
    assert cap.supports("n1") and not cap.supports("n2") and cap.reason("n2") == "no kernel"
    assert cap.fault is None and cap == plain and plain == cap
    assert repr(cap) == repr(plain).replace("Capability(", "DeferredCapability(")
    for twin in (pickle.loads(pickle.dumps(cap)), copy.copy(cap), cap.replace()):
        assert type(twin) is Capability and twin == plain
    cap.supported.discard("n1")  # the compile-fallback loop edits the answer in place
    assert not cap.supports("n1") and calls == [1]


def test_a_failing_compute_is_retried_and_raises_each_time():
    cap = DeferredCapability("b", lambda: 1 / 0)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            cap.supports("n")
    assert cap.pending


def _spy(monkeypatch) -> list[Any]:
    """The placement contexts of the builds (their capability answers)."""
    seen: list[Any] = []
    real = place.Placement.__init__

    def spy(self, context, *a, **k):
        seen.append(context)
        real(self, context, *a, **k)
    monkeypatch.setattr(place.Placement, "__init__", spy)
    return seen


def _report(sess: Session) -> list[dict]:
    return [p.to_dict() for p in sess.placement_report]


def _eager(monkeypatch) -> None:
    monkeypatch.setattr(place, "_per_node", lambda backend: False)


@pytest.mark.parametrize("ops", [["Relu", "Neg", "Abs"], ["Neg"], []])
def test_report_events_and_outputs_are_those_of_an_eager_backup(monkeypatch, ops):
    """Whole model claimed (the backup is never asked during the build), part
    of it (the backup is asked: nodes fall back), none of it."""
    good = make_fake_backend("good", ops)
    seen = _spy(monkeypatch)
    config = ScheduleConfig(backends=["good"], backup="numpy")
    lazy = Session(chain(), config, registry=make_registry(fake_plugin(good)))
    backup = seen[-1].capabilities["numpy"]
    assert isinstance(backup, DeferredCapability) and backup.pending == (len(ops) == 3)
    events = [e.to_dict() for e in lazy.events]
    report = _report(lazy)
    assert not backup.pending
    assert [e.to_dict() for e in lazy.events] == events  # reading the report adds nothing
    _eager(monkeypatch)
    eager = Session(chain(), config, registry=make_registry(fake_plugin(good)))
    assert not isinstance(seen[-1].capabilities["numpy"], DeferredCapability)
    assert report == _report(eager) and events == [e.to_dict() for e in eager.events]
    assert any(r["rejected"].get("numpy") is None for r in report)  # the backup's answers are in the report
    np.testing.assert_allclose(lazy.run(X)["y"], EXPECTED)
    if len(ops) < 3:
        assert [e["kind"] for e in events].count("node_fallback") == 1


def test_a_node_claimed_by_nobody_still_names_every_backends_reason(monkeypatch):
    good = make_fake_backend("good", ["Relu", "Abs"])
    bad_backup = make_fake_backend("spare", ["Relu", "Abs"])
    with pytest.raises(UnsupportedNodeError) as err:
        Session(chain(), ScheduleConfig(backends=["good"], backup="spare"),
                registry=make_registry(fake_plugin(good, bad_backup)))
    assert "neg1" in str(err.value) and "good" in str(err.value) and "spare" in str(err.value)


def test_a_backup_with_its_own_capability_check_is_asked_at_build(monkeypatch):
    """A ``_capability`` override can raise on purpose or answer garbage:
    its error and its ``plugin_fault`` event must come at build."""
    good = make_fake_backend("good", ["Relu", "Neg", "Abs"])

    def refuses(self, graph, options):
        raise ConfigError("backend 'strict': unknown device 'x'")
    strict = make_fake_backend("strict", [], _capability=refuses)
    with pytest.raises(ConfigError, match="unknown device 'x'"):
        Session(chain(), ScheduleConfig(backends=["good"], backup="strict"),
                registry=make_registry(fake_plugin(good, strict)))
    garbage = make_fake_backend("garbage", [], _capability=lambda self, graph, options: {"relu0"})
    sess = Session(chain(), ScheduleConfig(backends=["good"], backup="garbage"),
                   registry=make_registry(fake_plugin(good, garbage)))
    assert [e.kind for e in sess.events] == ["plugin_fault"]


def test_a_selected_backup_is_asked_at_build(monkeypatch):
    seen = _spy(monkeypatch)
    Session(chain(), ScheduleConfig(backends=["numpy"], backup="numpy"))
    assert not any(isinstance(c, DeferredCapability) for c in seen[-1].capabilities.values())


def test_onnxruntime_session_imports_no_numpy_kernels_until_the_report_is_read():
    """The fresh-process saving: a model ONNX Runtime runs whole leaves the
    backup's kernel modules unimported until the placement report is read."""
    pytest.importorskip("onnxruntime")
    head, _ = ORT_SESSION.rsplit("print(", 1)
    code = head + """before = loaded({"nnrt_numpy"})
report = [p.to_dict() for p in sess.placement_report]
print(json.dumps({"before": before, "after": loaded({"nnrt_numpy"}),
                  "placement": sorted({p["backend"] for p in report})}))
"""
    out = _python(code % ("onnxruntime",))
    assert out["placement"] == ["onnxruntime"]
    ops = lambda mods: [m for m in mods if m.startswith("nnrt_numpy.ops.") and m.count(".") == 3]  # noqa: E731
    assert ops(out["before"]) == [], out["before"]
    # nor the NumPy program and kernels' registry (imported on the backup's first check or compile)
    assert {"nnrt_numpy.program", "nnrt_numpy.kernel", "nnrt_numpy.fusion"}.isdisjoint(out["before"]), out["before"]
    assert ops(out["after"]), "the report asks the backup about every node"
