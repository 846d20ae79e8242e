"""TFLite import, second round: the ``nnrt_tflite_custom_ops`` plugin hook,
RFFT2D / COMPLEX_ABS (complex tensors as float pairs) and free input dims."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite")

from conftest import make_registry  # noqa: E402
from tflite_models import TFLiteWriter  # noqa: E402

from nnrt_core import ScheduleConfig, Session  # noqa: E402
from nnrt_core.errors import PluginError, UnsupportedNodeError  # noqa: E402
from nnrt_core.frontends.tflite import custom_ops  # noqa: E402
from nnrt_core.hookspec import hookimpl  # noqa: E402

NUMPY = ScheduleConfig(backends=["numpy"])


# ------------------------------------------------------------ custom-op hook
def _abs_model(op: str = "PlugAbs") -> bytes:
    w = TFLiteWriter()
    x = w.input("x", [3])
    y = w.tensor("y", [3])
    w.op("CUSTOM", [x], [y], custom=op)
    w.outputs = [y]
    return w.build()


def _plug_abs(ctx) -> None:
    ctx.set_out(0, ctx.node("Abs", [ctx.x(0)], *ctx.out_type(0)))


class _Plugin:
    def __init__(self, answer) -> None:
        self.answer = answer
        self.calls = 0

    @hookimpl
    def nnrt_tflite_custom_ops(self):
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def test_a_plugin_claims_a_custom_operator_through_the_hook():
    plugin = _Plugin({"PlugAbs": _plug_abs})
    sess = Session(_abs_model(), NUMPY, registry=make_registry(plugin))
    np.testing.assert_array_equal(sess.run({"x": np.array([-1, 2, -3], np.float32)})["y"], [1, 2, 3])
    assert plugin.calls == 1
    assert "PlugAbs" not in custom_ops()  # the hook does not touch the global registry


def test_the_hook_is_not_asked_when_nothing_is_unclaimed():
    w = TFLiteWriter()
    x = w.input("x", [3])
    y = w.tensor("y", [3])
    w.op("ABS", [x], [y])
    w.outputs = [y]
    plugin = _Plugin({"PlugAbs": _plug_abs})
    Session(w.build(), NUMPY, registry=make_registry(plugin))
    assert plugin.calls == 0


@pytest.mark.parametrize("answer, says", [
    (RuntimeError("boom"), "raised RuntimeError: boom"),
    (SystemExit(3), "raised SystemExit"),
    (["PlugAbs"], "returned a list, expected a dict"),
    ({"PlugAbs": 42}, "returned a int for 'PlugAbs', expected a callable mapper"),
    ({3: _plug_abs}, "returned the operator name 3"),
    (None, "returned a NoneType"),
])
def test_a_broken_hook_is_reported_not_a_crash(answer, says):
    with pytest.raises(UnsupportedNodeError) as e:
        Session(_abs_model(), NUMPY, registry=make_registry(_Plugin(answer)))
    msg = str(e.value)
    assert "PlugAbs" in msg and "plugin 'test0'" in msg and says in msg, msg


def test_a_good_plugin_still_works_beside_a_broken_one():
    reg = make_registry(_Plugin(RuntimeError("boom")), _Plugin({"PlugAbs": _plug_abs}))
    got = Session(_abs_model(), NUMPY, registry=reg).run({"x": np.array([-1, 0, 5], np.float32)})
    np.testing.assert_array_equal(got["y"], [1, 0, 5])


def test_two_plugins_claiming_one_operator_is_reported():
    reg = make_registry(_Plugin({"PlugAbs": _plug_abs}), _Plugin({"PlugAbs": _plug_abs}))
    mappers, problems = reg.tflite_custom_ops()
    assert list(mappers) == ["PlugAbs"]
    assert len(problems) == 1 and "claims 'PlugAbs', which plugin 'test0' claims already" in problems[0]


def test_a_plugin_mapper_that_raises_is_a_plugin_error():
    def bad(ctx):
        raise KeyError("nope")

    with pytest.raises(PluginError, match="plugin mapper of custom operator 'PlugAbs' raised KeyError"):
        Session(_abs_model(), NUMPY, registry=make_registry(_Plugin({"PlugAbs": bad})))
