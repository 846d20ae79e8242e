"""Build onnx's operator-schema registry on a background thread.

The first call into onnx's checker or shape inference builds the C++
registry of every operator schema: 10-15 ms of a fresh process on this VM,
on the path to the first inference.  The registry is the function-local
static of ``onnx::OpSchemaRegistry::map()``, which C++ initializes once and
thread-safely (a second caller waits for the first).  :func:`start` calls
that function through ``ctypes`` on a thread when the extension is loaded
(``ctypes`` releases the GIL for the call), so the registry is built on
another core while the import and the model's parsing go on.

Guarded: the exported symbol is looked up by its mangled name, which also
encodes the signature (a static function without parameters); when it is
missing (another onnx build, another platform) nothing is started and the
first check builds the registry as before.  ``NNRT_ONNX_PRIME=0`` turns it
off.  The thread comes from :mod:`nnrt_core.background`, so a ``fork`` and
the exit wait for it: no process forks or exits in the middle of the
static's initialization (a forked child would wait forever for a thread it
does not have).
"""
from __future__ import annotations

import os
import threading
from types import ModuleType

from nnrt_core import background

__all__ = ["ENV_VAR", "SYMBOL", "start"]

#: ``NNRT_ONNX_PRIME=0`` leaves the registry to the first check
ENV_VAR = "NNRT_ONNX_PRIME"
#: ``onnx::OpSchemaRegistry::map()`` (static, no parameters), Itanium C++ ABI with the cxx11 string ABI tag
SYMBOL = "_ZN4onnx16OpSchemaRegistry3mapB5cxx11Ev"

_thread: threading.Thread | None = None
_lib: object = None  # the ctypes handle, kept (a dropped CDLL is cyclic garbage)


def start(extension: ModuleType | None) -> bool:
    """Build the registry of ``extension`` (the loaded ``onnx_cpp2py_export``)
    on a background thread, once per process; True when it was started."""
    global _thread, _lib
    if _thread is not None or extension is None or os.environ.get(ENV_VAR, "1") == "0":
        return False
    path = getattr(extension, "__file__", None)
    if not path:
        return False
    try:
        import ctypes
        # RTLD_NOLOAD: the handle of the library Python already loaded, never a second copy
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 0))
        build = getattr(lib, SYMBOL)
    except (OSError, AttributeError, TypeError, ValueError):
        return False
    build.argtypes, build.restype = [], None
    _lib = lib
    _thread = background.start(build, "nnrt-onnx-schemas")
    return True
