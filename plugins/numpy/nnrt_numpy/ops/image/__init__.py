"""Operator kernels: image.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import affine_grid  # noqa: F401
from . import grid_sample  # noqa: F401
from . import image_decoder  # noqa: F401
from . import non_max_suppression  # noqa: F401
from . import resize  # noqa: F401
from . import roi_align  # noqa: F401
from . import upsample  # noqa: F401
