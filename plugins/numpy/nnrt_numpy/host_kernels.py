"""The NumPy backend's public module for other plugins: host kernels and the
process's thread policy they share.

The NPU emulator runs its depthwise convolutions and pools on these kernels,
so that both backends sum the same taps in the same order, checks its
windows with the same output-size and window-fit rules, and splits its
host work over the same helper threads under the same BLAS policy (one pool
and one policy per process, whichever backend runs).  The kernels live in the
op packages' private modules (``ops/nn/_depthwise.py``,
``ops/nn/_spatial.py``); this module is the one place another plugin imports
them from (``tests/test_architecture.py`` checks it), so those modules can
change shape behind it.  A plugin that imports it declares the
``nnrt-backend-numpy`` distribution (already a dependency of ``nnrt-core``,
whose embedded default backend it is).  Names are imported on first use.

* :class:`DepthwisePlan`, :func:`pooled_reduce`: the depthwise and pooling kernels;
* :mod:`parallel`: the helper-thread pool (``threads``, ``run_chunks``,
  ``split_threads``...), :func:`run_chunks`, :func:`start_helpers`;
* :func:`blas_threads`: the BLAS / helper-thread policy of one run;
* :data:`clip`: NumPy's clip without ``np.clip``'s Python wrapper.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nnrt_numpy import parallel
    from nnrt_numpy.blas import blas_threads
    from nnrt_numpy.ops.nn._depthwise import DepthwisePlan
    from nnrt_numpy.ops.nn._spatial import pooled_reduce, resolve_pads, window_misfit
    from nnrt_numpy.parallel import run_chunks, start_helpers
    from nnrt_numpy.ufuncs import clip

#: public name -> the module that defines it (``parallel`` is the module itself)
_LAZY = {"DepthwisePlan": "nnrt_numpy.ops.nn._depthwise", "pooled_reduce": "nnrt_numpy.ops.nn._spatial",
         "resolve_pads": "nnrt_numpy.ops.nn._spatial", "window_misfit": "nnrt_numpy.ops.nn._spatial",
         "parallel": "nnrt_numpy.parallel", "run_chunks": "nnrt_numpy.parallel",
         "start_helpers": "nnrt_numpy.parallel", "blas_threads": "nnrt_numpy.blas", "clip": "nnrt_numpy.ufuncs"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nnrt_numpy.host_kernels' has no attribute {name!r}")
    import importlib

    mod = importlib.import_module(module)
    value = mod if name == "parallel" else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
