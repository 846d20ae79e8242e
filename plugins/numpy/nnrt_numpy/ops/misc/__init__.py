"""Operator kernels: misc.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

# from . import <module>  -- one line per op module
