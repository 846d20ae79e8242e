"""The operator mappers, one small module per operator family, and their registry.

Importing this package registers every builtin mapper (the explicit list
below); a new mapper is a new module added to it.
"""
from __future__ import annotations

from nnrt_core.frontends.tflite.ops import (  # noqa: F401 - importing registers the mappers
    binary,
    concat,
    conv,
    fully_connected,
    gather,
    matmul,
    misc,
    pad,
    pool,
    quant,
    reduce,
    reshape,
    resize,
    slice,
    softmax,
    space_depth,
    split,
    transpose,
    transpose_conv,
    unary,
)
# mappers added for the real models of benchmarks/tflite_models.py (tests/test_tflite_real_ops.py)
from nnrt_core.frontends.tflite.ops import compare, control, math_ops, mediapipe, variables  # noqa: F401,E402
# complex tensors and sequences (tests/test_tflite_more.py)
from nnrt_core.frontends.tflite.ops import fft, sequence  # noqa: F401,E402
from nnrt_core.frontends.tflite.ops.registry import (
    Mapper,
    available_ops,
    custom_ops,
    mapper_for,
    register,
    register_op,
    shortcut_for,
    unregister_op,
)

__all__ = ["Mapper", "available_ops", "custom_ops", "mapper_for", "register", "register_op", "shortcut_for",
           "unregister_op"]
