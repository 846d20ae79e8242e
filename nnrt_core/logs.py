"""Loggers that import :mod:`logging` only when a record can be emitted.

``logging`` (with ``traceback`` and ``string``) costs ~2 ms of a fresh
process, and a session that builds without a warning logs only at INFO and
DEBUG: modules on the session's import path hold a :class:`LazyLogger` from
:func:`get_logger` instead of ``logging.getLogger(name)``.

While ``logging`` has never been imported, nothing can have configured a
handler or a level, so ``logging``'s defaults hold (effective level WARNING):
``debug``/``info`` calls and ``log`` below WARNING are dropped without
importing it, and ``isEnabledFor(level)`` is ``level >= WARNING``.  Anything
else (a warning, ``handlers``, ``setLevel``...), and every call once
``logging`` is imported, goes to ``logging.getLogger(name)`` itself, with the
caller's frame as the record's origin.  The level numbers are ``logging``'s.
"""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["DEBUG", "INFO", "WARNING", "ERROR", "LazyLogger", "get_logger"]

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40  # logging.DEBUG ... (checked in tests/test_lazy_loading.py)


class LazyLogger:
    """``logging.getLogger(name)``, resolved when a record may be emitted."""

    __slots__ = ("name", "logger")

    def __init__(self, name: str) -> None:
        self.name = name
        self.logger: Any = None

    def resolve(self) -> Any:
        """The ``logging.Logger`` (imports ``logging``)."""
        logger = self.logger
        if logger is None:
            import logging

            logger = self.logger = logging.getLogger(self.name)
        return logger

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.resolve(), attr)

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging's name
        if "logging" not in sys.modules:
            return level >= WARNING
        return self.resolve().isEnabledFor(level)

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        if level >= WARNING or "logging" in sys.modules:
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
            self.resolve().log(level, msg, *args, **kwargs)

    def debug(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        if "logging" in sys.modules:
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
            self.resolve().debug(msg, *args, **kwargs)

    def info(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        if "logging" in sys.modules:
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
            self.resolve().info(msg, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<LazyLogger {self.name!r}>"


def get_logger(name: str) -> LazyLogger:
    """A :class:`LazyLogger` for ``name`` (``nnrt.backend``, ``nnrt.onnx``...)."""
    return LazyLogger(name)
