"""Graph passes run on the IR before placement."""
from __future__ import annotations

from nnrt_core.passes.constant_folding import fold_constants

__all__ = ["fold_constants"]
