"""ONNX conformance through onnx's BackendTest on the NumPy backend: every
node case shipped with the onnx package plus the real-model, simple,
pytorch-converted and pytorch-operator suites.

Expected failures are listed, each with its reason, in
``conformance_expected_failures.py``; a listed test that starts passing fails
the run (unexpected success) so the list stays true.
"""
from __future__ import annotations

from conformance_expected_failures import EXPECTED_FAILURES
from nnrt_core import ScheduleConfig
from onnx_suites import backend_test_cases

globals().update(backend_test_cases(ScheduleConfig(backends=["numpy"]), __name__, r"_cpu$",
                                    xfail=EXPECTED_FAILURES))


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
