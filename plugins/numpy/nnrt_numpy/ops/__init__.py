"""All operator kernels of the NumPy backend, grouped by category.

Importing this package registers every kernel in ``nnrt_numpy.kernel.REGISTRY``.
"""
from __future__ import annotations

from . import contrib, control, image, math, misc, ml, nn, preview, quant, rnn, sequence, signal, tensor, training  # noqa: F401
