"""The one place that imports ``openvino`` (and says how to install it when
that fails), and the process's shared ``openvino.Core``."""
from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any

__all__ = ["MODULE", "INSTALL_HINT", "OpenVinoMissing", "import_openvino", "core", "ov_version"]

#: the module this plugin drives (a test points it at a missing name to see the plugin without it)
MODULE = "openvino"
INSTALL_HINT = "pip install openvino (or pip install -e ./plugins/openvino, which brings it)"

_core: Any = None
_lock = threading.Lock()


class OpenVinoMissing(ImportError):
    """``openvino`` cannot be imported; the message says how to install it."""


def import_openvino() -> ModuleType:
    """The ``openvino`` module, or :class:`OpenVinoMissing` naming the fix."""
    try:
        return importlib.import_module(MODULE)
    except ImportError as e:
        raise OpenVinoMissing(f"the {MODULE!r} package is not installed or does not import "
                              f"({type(e).__name__}: {e}); install it with: {INSTALL_HINT}") from e


def core() -> Any:
    """One ``openvino.Core`` per process (it holds the device plugins)."""
    global _core
    if _core is None:
        ov = import_openvino()
        with _lock:
            if _core is None:
                _core = ov.Core()
    return _core


def ov_version() -> str:
    """The installed OpenVINO's version (``2026.4.1-22982-...``)."""
    return str(import_openvino().get_version())
