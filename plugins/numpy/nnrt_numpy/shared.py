"""Objects the kernels of one compile share: made once per key, not once per node.

``GraphProgram`` opens :func:`sharing` around its kernels' set-up; a kernel
asks :func:`shared` for an object that depends only on a hashable key (a
depthwise convolution's plan and scratch pool, keyed by every shape and
attribute it is made from), so nodes of the same shape and attributes
share one.  Outside a scope (a shape first seen at run time, a kernel made
on its own) nothing is shared and ``make()`` is called every time.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Any, Callable, Hashable, Iterator

__all__ = ["sharing", "shared"]

_SCOPE: ContextVar[dict | None] = ContextVar("nnrt_numpy_shared", default=None)


@contextlib.contextmanager
def sharing() -> Iterator[None]:
    """A scope in which :func:`shared` objects are reused (a nested scope is the outer one)."""
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def shared(key: Hashable, make: Callable[[], Any]) -> Any:
    """The object made for ``key`` earlier in this scope, else ``make()`` (kept for the scope)."""
    scope = _SCOPE.get()
    if scope is None:
        return make()
    obj = scope.get(key)
    if obj is None:
        obj = scope[key] = make()
    return obj
