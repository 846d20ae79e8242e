"""The direct run of a plan that is one host partition with nothing to convert
(``Executor.direct``, ``Session.run``'s path for plain feeds and no control).

One closure made at build: the feed test of :class:`~nnrt_core.runtime.feeds.FeedValidator`'s
common case inline (a plain dict with one array per input, of the declared
dtype and shape test), then the partition's ``direct_run`` callable and its
output check.  Feeds that do not pass the test return ``None``: the caller
takes the full path, whose check names what is wrong or converts them."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from nnrt_core.runtime.activity import RUNNING
from nnrt_core.runtime.feeds import FeedSpec

__all__ = ["direct_call"]


def direct_call(specs: Sequence[FeedSpec], run: Callable[[Mapping[str, Any]], Any],
                tests: Sequence[Any] | None, check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``feeds -> outputs`` through ``run`` for feeds that pass ``specs``' test, else
    ``None``.  The outputs pass ``tests`` (``OutputCheck.tests``, compared inline)
    or go through ``check`` (the precise check: an error, or the outputs when right);
    ``tests=None``: ``check`` sees every run (a model's unconfirmed declarations)."""
    specs, count, ndarray = tuple(specs), len(specs), np.ndarray
    out_tests = tuple(tests) if tests is not None else ()

    def direct(feeds: Any) -> Any:
        if type(feeds) is not dict or len(feeds) != count:
            return None
        get = feeds.get
        for name, dtype, ndim, static, getter, want in specs:
            x = get(name)
            if type(x) is not ndarray or (x.dtype is not dtype and x.dtype != dtype):
                return None
            if static is not None:
                if x.shape != static:
                    return None
            elif getter is None:
                if x.ndim != ndim:  # free dimensions only: the rank (an int, no shape tuple made)
                    return None
            else:
                shape = x.shape  # a new tuple per access: read once
                if len(shape) != ndim or getter(shape) != want:
                    return None
        with RUNNING:  # a background build pauses meanwhile (runtime/activity.py)
            outs = run(feeds)
        if tests is None or type(outs) is not dict:
            return check(outs)
        get = outs.get
        for name, dtype, ndim, static, getter, want in out_tests:  # OutputCheck's fast test, inline
            x = get(name)
            if type(x) is not ndarray or (dtype is not None and x.dtype is not dtype and x.dtype != dtype):
                return check(outs)
            if static is not None:
                if x.shape != static:
                    return check(outs)
            elif ndim is not None:
                if getter is None:
                    if x.ndim != ndim:
                        return check(outs)
                else:
                    shape = x.shape
                    if len(shape) != ndim or getter(shape) != want:
                        return check(outs)
        return outs
    return direct
