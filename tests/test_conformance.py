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
