"""Entry point of the OpenVINO backend (group ``nnrt.backends``).

Without the ``openvino`` package the hook raises :class:`~.runtime.OpenVinoMissing`:
the plugin is then listed as failed with the install hint (``nnrt devices``),
and a config naming ``openvino`` is a ``ConfigError`` carrying that reason."""
from __future__ import annotations

from nnrt_openvino._core import hookimpl

__all__ = ["nnrt_backends"]


@hookimpl
def nnrt_backends():
    from nnrt_openvino.runtime import import_openvino

    import_openvino()  # OpenVinoMissing (with the install hint) when absent
    from nnrt_openvino.backend import OpenVinoBackend

    return [OpenVinoBackend]
