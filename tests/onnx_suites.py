"""Helpers to run onnx's BackendTest suites through nnrt (only the selected
tests are generated, so pytest does not list thousands of skips)."""
from __future__ import annotations

import re

import onnx.backend.test

from conformance_data import spec_undefined_cases
from nnrt_core import ScheduleConfig
from nnrt_core.frontends.onnx.backend_adapter import nnrt_backend


def backend_test_cases(config: ScheduleConfig, module: str, pattern: str,
                       xfail: dict[str, str] | None = None,
                       exclude: dict[str, str] | None = None) -> dict[str, type]:
    """unittest TestCase classes for the onnx backend tests matching ``pattern``.

    ``xfail`` maps test names to the reason they are expected to fail;
    ``exclude`` those not run at all (with the reason).  Cases whose generated
    expectation holds values the spec leaves undefined (``conformance_data``)
    are never run here: test_conformance.py checks them on spec-defined data.
    """
    exclude = {**spec_undefined_cases(), **(exclude or {})}
    suite = onnx.backend.test.BackendTest(nnrt_backend(config), module)
    rx = re.compile(pattern)
    for items in suite._test_items.values():  # prune instead of skip: keeps the report readable
        for name in [n for n in items if not rx.search(n) or n in exclude]:
            del items[name]
    for name, reason in (xfail or {}).items():
        suite.xfail(f"^{re.escape(name)}$")
    return suite.test_cases
