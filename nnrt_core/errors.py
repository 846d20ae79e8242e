"""Exception types raised by nnrt.

Every error the runtime raises on bad input derives from :class:`NnrtError`, so a
caller can catch one type.  Each subclass names a layer of the runtime.
"""
from __future__ import annotations

__all__ = [
    "NnrtError",
    "ModelLoadError",
    "GraphError",
    "ConfigError",
    "PluginError",
    "BackendUnavailableError",
    "UnsupportedNodeError",
    "PlacementError",
    "CompileError",
    "ExecutionError",
    "NumericOverflowError",
    "OpError",
    "InputError",
    "SessionFileError",
    "QuantizationError",
    "RunStoppedError",
    "RunTimeoutError",
    "RunCancelledError",
    "MemoryBudgetError",
]


class NnrtError(Exception):
    """Base class of every error nnrt raises on purpose."""


class ModelLoadError(NnrtError):
    """A model file, byte string or proto could not be turned into a graph."""


class GraphError(NnrtError):
    """The IR graph is malformed (dangling value, cycle, duplicate name...)."""


class ConfigError(NnrtError, ValueError):
    """A configuration value is unknown or out of range."""


class PluginError(NnrtError):
    """A plugin is broken, duplicated or misconfigured."""


class BackendUnavailableError(NnrtError):
    """A backend is installed but cannot be used on this machine."""


class UnsupportedNodeError(NnrtError):
    """No selected backend (nor the backup) can run some nodes."""


class PlacementError(NnrtError):
    """The scheduler could not produce a valid placement."""


class CompileError(NnrtError):
    """A backend failed to compile a partition."""


class ExecutionError(NnrtError):
    """A compiled partition failed while running."""


class NumericOverflowError(ExecutionError):
    """A partition computing in reduced precision (an fp16 NPU) saturated:
    a store met a value beyond its type's range (or NaN from finite inputs).
    The run went on like the chip's does; ``outputs`` holds what it returned.
    ``partition``, ``backend``, ``node`` (the first node whose store
    overflowed, where known) and ``value`` (a value that did not fit) say
    where; ``ScheduleConfig.on_overflow`` says what the session does."""

    def __init__(self, message: str, *, partition: str = "", backend: str = "", node: str | None = None,
                 value: float | None = None, outputs: dict | None = None) -> None:
        super().__init__(message)
        self.partition, self.backend, self.node, self.value = partition, backend, node, value
        self.outputs = {} if outputs is None else outputs


class OpError(NnrtError, ValueError):
    """An operator got attributes or inputs that violate its specification."""


class InputError(NnrtError, ValueError):
    """Feeds given to ``Session.run`` do not match the model's inputs."""


class SessionFileError(NnrtError):
    """A compiled-session file (offline model or cache entry) is corrupted,
    truncated, from a newer format, or cannot be loaded here."""


class QuantizationError(NnrtError, ValueError):
    """A model or a calibration data set cannot be quantized as asked."""


class RunStoppedError(ExecutionError):
    """A run was stopped before it finished (its deadline passed or it was
    cancelled); the message names the node or partition it stopped in."""


class RunTimeoutError(RunStoppedError, TimeoutError):
    """A run passed its deadline (``Session.run(..., timeout=...)``)."""


class RunCancelledError(RunStoppedError):
    """A run was cancelled (``RunFuture.cancel()``, ``RunControl.cancel()``)."""


class MemoryBudgetError(ExecutionError, MemoryError):
    """A tensor would exceed the session's memory budget
    (``ScheduleConfig.max_tensor_bytes``); refused before it is allocated."""
