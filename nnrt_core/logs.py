"""Loggers that import :mod:`logging` when first used.

``logging`` (with ``traceback`` and ``string``) costs ~2 ms of a fresh
process, and a session that builds without a warning never logs: modules on
the session's import path hold a :class:`LazyLogger` from :func:`get_logger`
instead of ``logging.getLogger(name)``.  Its first attribute read (``info``,
``warning``, ``log``, ``isEnabledFor``, ``handlers``...) imports ``logging``
and binds ``logging.getLogger(name)``; every read is then that logger's
attribute, so handlers, levels and ``caplog`` behave as with the logger
itself.  The level numbers are ``logging``'s.
"""
from __future__ import annotations

from typing import Any

__all__ = ["DEBUG", "INFO", "WARNING", "ERROR", "LazyLogger", "get_logger"]

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40  # logging.DEBUG ... (checked in tests/test_lazy_loading.py)


class LazyLogger:
    """``logging.getLogger(name)``, resolved on first use."""

    __slots__ = ("name", "logger")

    def __init__(self, name: str) -> None:
        self.name = name
        self.logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        logger = self.logger
        if logger is None:
            import logging

            logger = self.logger = logging.getLogger(self.name)
        return getattr(logger, attr)

    def __repr__(self) -> str:
        return f"<LazyLogger {self.name!r}>"


def get_logger(name: str) -> LazyLogger:
    """A :class:`LazyLogger` for ``name`` (``nnrt.backend``, ``nnrt.onnx``...)."""
    return LazyLogger(name)
