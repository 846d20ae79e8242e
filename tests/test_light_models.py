"""The onnx package's real models (`light` suite) against their shipped
expected outputs, through onnx's own BackendTest runner over nnrt.Session."""
from __future__ import annotations

from nnrt_core import ScheduleConfig
from onnx_suites import backend_test_cases

LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
         "shufflenet", "squeezenet", "vgg19", "zfnet512"]

globals().update(backend_test_cases(ScheduleConfig(backends=["numpy"]), __name__,
                                    r"^test_(" + "|".join(LIGHT) + r")_cpu$"))
