"""ONNX conformance through onnx's BackendTest on the NumPy backend: every
node case shipped with the onnx package plus the real-model, simple,
pytorch-converted and pytorch-operator suites.

Expected failures are listed, each with its reason, in
``conformance_expected_failures.py``; a listed test that starts passing fails
the run (unexpected success) so the list stays true.
"""
from __future__ import annotations

import pytest

from conformance_data import spec_defined, spec_undefined_cases
from conformance_expected_failures import EXPECTED_FAILURES, RANDOM_CASES
from nnrt_core import ScheduleConfig
from onnx_suites import backend_test_cases

globals().update(backend_test_cases(ScheduleConfig(backends=["numpy"]), __name__, r"_cpu$",
                                    xfail=EXPECTED_FAILURES, exclude=RANDOM_CASES))


def test_loop16_seq_none_output_matches():
    """test_loop16_seq_none cannot be compared by onnx's runner (see
    conformance_expected_failures.py); compare its sequence output here."""
    import numpy as np
    from onnx.backend.test.loader import load_model_tests

    from nnrt_core.frontends.onnx.backend_adapter import nnrt_backend

    case = next(c for c in load_model_tests(kind="node") if c.name == "test_loop16_seq_none")
    rep = nnrt_backend(ScheduleConfig(backends=["numpy"])).prepare(case.model)
    for inputs, expected in case.data_sets:
        outputs = rep.run(inputs)
        assert len(outputs) == len(expected) == 1
        got, want = outputs[0], expected[0]
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("name", sorted(spec_undefined_cases()))
def test_spec_undefined_cases_match_where_the_spec_defines_them(name):
    """Cast cases whose generated data cast out-of-range floats to integers
    (undefined by the spec; the expectation follows the generator's ml_dtypes):
    every element the spec defines matches, under any ml_dtypes release."""
    import numpy as np

    from nnrt_core.frontends.onnx.backend_adapter import nnrt_backend

    case = _random_case(name)
    rep = nnrt_backend(ScheduleConfig(backends=["numpy"])).prepare(case.model)
    for inputs, expected in spec_defined(case):
        (got,), (want,) = rep.run(inputs), expected
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64))


def _random_case(name: str):
    from onnx.backend.test.loader import load_model_tests

    return next(c for c in load_model_tests(kind="node") if c.name == name.removesuffix("_cpu"))


@pytest.mark.parametrize("name", sorted(RANDOM_CASES))
def test_random_cases_draw_zeros_and_ones_in_the_expected_type(name):
    """The Bernoulli cases compare one random draw; check what any correct
    sampler gives: the expected dtype and shape, only 0 and 1, and 1 where
    p = 1 and 0 where p = 0."""
    import numpy as np

    from nnrt_core.frontends.onnx.backend_adapter import nnrt_backend

    case = _random_case(name)
    rep = nnrt_backend(ScheduleConfig(backends=["numpy"])).prepare(case.model)
    for inputs, expected in case.data_sets:
        (got,), (want,) = rep.run(inputs), expected
        assert got.dtype == want.dtype and got.shape == want.shape
        assert set(np.unique(got).tolist()) <= {0, 1}
        p = np.asarray(inputs[0])
        assert np.all(got[p == 1] == 1) and np.all(got[p == 0] == 0)


def test_bernoulli_rate_and_seed():
    """Large draws: the rate of ones follows p; a seed makes runs repeat."""
    import numpy as np
    from onnx import TensorProto, helper

    from nnrt_core import Session

    def model(seed=None):
        attrs = {} if seed is None else {"seed": float(seed)}
        node = helper.make_node("Bernoulli", ["p"], ["y"], **attrs)
        g = helper.make_graph([node], "b", [helper.make_tensor_value_info("p", TensorProto.FLOAT, [200_000])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [200_000])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])

    p = np.repeat(np.array([0.1, 0.5, 0.9], np.float32), [60_000, 80_000, 60_000])
    y = Session(model(), ScheduleConfig(backends=["numpy"])).run({"p": p})["y"]
    for lo, hi, rate in ((0, 60_000, 0.1), (60_000, 140_000, 0.5), (140_000, 200_000, 0.9)):
        assert abs(y[lo:hi].mean() - rate) < 0.01  # ~8 standard errors
    seeded = [Session(model(seed=7), ScheduleConfig(backends=["numpy"])).run({"p": p})["y"] for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])
    assert not np.array_equal(seeded[0], y)


def test_float_to_4_bit_cast_is_the_same_under_every_ml_dtypes_release():
    """float -> int4/uint4 on NumPy truncates and keeps the low bits (ml_dtypes
    itself wraps in 0.6 and gives 0 in 0.7 out of range); NaN and inf give 0."""
    import numpy as np
    from onnx import TensorProto, helper

    from nnrt_core import Session

    x = np.array([-9, -1.5, -0.5, 0, 1.9, 7, 8, 15, 16, 17, 100, np.nan, np.inf, -np.inf], np.float32)
    for to, want in ((TensorProto.UINT4, [7, 15, 0, 0, 1, 7, 8, 15, 0, 1, 4, 0, 0, 0]),
                     (TensorProto.INT4, [7, -1, 0, 0, 1, 7, -8, -1, 0, 1, 4, 0, 0, 0])):
        g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=to)], "c",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                              [helper.make_tensor_value_info("y", to, [x.size])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        y = Session(m, ScheduleConfig(backends=["numpy"])).run({"x": x})["y"]
        assert y.astype(np.int64).tolist() == want
