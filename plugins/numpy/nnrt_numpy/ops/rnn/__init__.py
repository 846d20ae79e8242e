"""Operator kernels: rnn.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import gru  # noqa: F401
from . import lstm  # noqa: F401
from . import rnn  # noqa: F401
