"""Identity: returns its input (tensor, sequence or optional) unchanged."""
from __future__ import annotations

from typing import Any

from ...kernel import Kernel, register


@register
class Identity(Kernel):
    op_type = "Identity"
    since_version = 1

    def __call__(self, x: Any) -> tuple[Any]:
        return (x,)
