"""Graph passes run on the IR before placement.

:class:`PassManager` runs the passes of an optimization level (``none`` /
``basic`` / ``extended`` / ``all``, as in ONNX Runtime) to a fixed point and
returns a :class:`PassReport`; see docs/passes.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from nnrt_core.lazy_names import lazy_names

if TYPE_CHECKING:
    from nnrt_core.passes.affine_folding import AffineFolding
    from nnrt_core.passes.base import LEVELS, Pass, PassContext, PassResult, level_rank
    from nnrt_core.passes.cleanup import DeadNodeElimination, IdentityElimination
    from nnrt_core.passes.constant_folding import ConstantFolding, ShapeFolding, fold_constants
    from nnrt_core.passes.cse import CommonSubexpressionElimination
    from nnrt_core.passes.fusion import ActivationFusion, BackendSupport
    from nnrt_core.passes.layout import TransposeReshapeCancellation
    from nnrt_core.passes.layernorm import LayerNormFusion
    from nnrt_core.passes.qdq import QdqCleanup
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
    "LayerNormFusion",
    "Pass",
    "PassContext",
    "PassManager",
    "PassReport",
    "PassResult",
    "PassSummary",
    "QdqCleanup",
    "ShapeFolding",
    "StaticShapeRefinement",
    "TransposeReshapeCancellation",
    "default_passes",
    "fold_constants",
    "level_rank",
]

#: name -> the module defining it, imported on first use (PEP 562), so that
#: importing one module of this package does not import them all
_HOME = {
    'AffineFolding': 'nnrt_core.passes.affine_folding',
    'LEVELS': 'nnrt_core.passes.base',
    'Pass': 'nnrt_core.passes.base',
    'PassContext': 'nnrt_core.passes.base',
    'PassResult': 'nnrt_core.passes.base',
    'level_rank': 'nnrt_core.passes.base',
    'DeadNodeElimination': 'nnrt_core.passes.cleanup',
    'IdentityElimination': 'nnrt_core.passes.cleanup',
    'ConstantFolding': 'nnrt_core.passes.constant_folding',
    'ShapeFolding': 'nnrt_core.passes.constant_folding',
    'fold_constants': 'nnrt_core.passes.constant_folding',
    'CommonSubexpressionElimination': 'nnrt_core.passes.cse',
    'ActivationFusion': 'nnrt_core.passes.fusion',
    'BackendSupport': 'nnrt_core.passes.fusion',
    'TransposeReshapeCancellation': 'nnrt_core.passes.layout',
    'QdqCleanup': 'nnrt_core.passes.qdq',
    'LayerNormFusion': 'nnrt_core.passes.layernorm',
    'StaticShapeRefinement': 'nnrt_core.passes.shapes',
    'ALL_PASSES': 'nnrt_core.passes.manager',
    'PassManager': 'nnrt_core.passes.manager',
    'PassReport': 'nnrt_core.passes.report',
    'PassSummary': 'nnrt_core.passes.report',
    'default_passes': 'nnrt_core.passes.manager',
}

__getattr__, __dir__ = lazy_names(__name__, _HOME)
