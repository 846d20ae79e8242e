"""Entry point of the NumPy backend (group ``nnrt.backends``)."""
from __future__ import annotations

from nnrt_core.plugin_api import hookimpl


@hookimpl
def nnrt_backends():
    from nnrt_numpy.backend import NumpyBackend

    return [NumpyBackend]
