"""Operator kernels: image.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import resize  # noqa: F401
from . import upsample  # noqa: F401
