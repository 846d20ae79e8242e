"""Operator kernels: math.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

# from . import <module>  -- one line per op module
from . import argmax  # noqa: F401
from . import arith  # noqa: F401
from . import bitwise  # noqa: F401
from . import compare  # noqa: F401
from . import cumulative  # noqa: F401
from . import det  # noqa: F401
from . import einsum  # noqa: F401
from . import gemm  # noqa: F401
from . import matmul  # noqa: F401
from . import mod  # noqa: F401
from . import pow  # noqa: F401
from . import range  # noqa: F401
from . import reduce  # noqa: F401
from . import trilu  # noqa: F401
from . import unary  # noqa: F401
from . import variadic  # noqa: F401
from . import where  # noqa: F401
