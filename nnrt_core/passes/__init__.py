"""Graph passes run on the IR before placement.

:class:`PassManager` runs the passes of an optimization level (``none`` /
``basic`` / ``extended`` / ``all``, as in ONNX Runtime) to a fixed point and
returns a :class:`PassReport`; see docs/passes.md.
"""
from __future__ import annotations

from nnrt_core.passes.affine_folding import AffineFolding
from nnrt_core.passes.base import LEVELS, Pass, PassContext, PassResult, level_rank
from nnrt_core.passes.cleanup import DeadNodeElimination, IdentityElimination
from nnrt_core.passes.constant_folding import ConstantFolding, ShapeFolding, fold_constants
from nnrt_core.passes.cse import CommonSubexpressionElimination
from nnrt_core.passes.fusion import ActivationFusion, BackendSupport
from nnrt_core.passes.layout import TransposeReshapeCancellation
from nnrt_core.passes.shapes import StaticShapeRefinement
from nnrt_core.passes.manager import ALL_PASSES, PassManager, PassReport, PassSummary, default_passes

__all__ = [
    "ALL_PASSES",
    "LEVELS",
    "ActivationFusion",
    "AffineFolding",
    "BackendSupport",
    "CommonSubexpressionElimination",
    "ConstantFolding",
    "DeadNodeElimination",
    "IdentityElimination",
    "Pass",
    "PassContext",
    "PassManager",
    "PassReport",
    "PassResult",
    "PassSummary",
    "ShapeFolding",
    "StaticShapeRefinement",
    "TransposeReshapeCancellation",
    "default_passes",
    "fold_constants",
    "level_rank",
]
