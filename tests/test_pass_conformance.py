"""ONNX conformance cases at optimization level ``all``: the passes must not
change any answer.

By default a subset runs: the node cases of the ops the passes rewrite or
read (Conv, Gemm, BatchNormalization, the fusable activations, Identity,
Dropout, Cast, Transpose, the reshape family, Shape/Size, Constant, and the
control-flow ops whose bodies read outer values) plus every converted
PyTorch model and operator case (real Conv/BN/Gemm graphs with weights).
``NNRT_PASS_CONFORMANCE=all`` runs every case.
"""
from __future__ import annotations

import os

from conformance_expected_failures import EXPECTED_FAILURES
from nnrt_core import ScheduleConfig
from onnx_suites import backend_test_cases

SUBSET = (r"^test_(conv|gemm|batchnorm|relu|leakyrelu|sigmoid|tanh|clip|hardsigmoid|identity|dropout|cast_"
          r"|transpose|reshape|shape|size|squeeze|unsqueeze|flatten|constant|if|loop|scan|range|expand"
          r"|operator_|[A-Z])\w*_cpu$")
PATTERN = r"_cpu$" if os.environ.get("NNRT_PASS_CONFORMANCE") == "all" else SUBSET

#: cases whose answer legitimately changes at level all
LEVEL_ALL_FAILURES = {
    # the uniform 0.02 weights make all 1000 logits tie at ~3.6e12; the expected
    # softmax is exactly uniform only with Gemm's summation order.  FusedGemm
    # rounds one ulp differently (relative error 7e-8), which breaks the ties.
    "test_bvlc_alexnet_cpu": "ties between 3.6e12 logits broken by 1-ulp rounding in FusedGemm",
}

globals().update(backend_test_cases(ScheduleConfig(backends=["numpy"], optimization_level="all"), __name__,
                                    PATTERN, xfail={**EXPECTED_FAILURES, **LEVEL_ALL_FAILURES}))
