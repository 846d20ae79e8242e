"""Operator kernels: signal.  Import each op module explicitly (it registers itself)."""
from __future__ import annotations

from . import blackman_window  # noqa: F401
from . import dft  # noqa: F401
from . import hamming_window  # noqa: F401
from . import hann_window  # noqa: F401
from . import mel_weight_matrix  # noqa: F401
from . import stft  # noqa: F401
