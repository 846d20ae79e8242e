"""The errors a request can get, each with its HTTP status and gRPC code:
the protocol's answer is ``{"error": message}`` with that status."""
from __future__ import annotations

from nnrt_core.errors import ConfigError, InputError, NnrtError, RunCancelledError, RunTimeoutError

__all__ = ["ServeError", "BadRequest", "ModelNotFound", "Unavailable", "PayloadTooLarge", "Unauthorized",
           "DeadlineExceeded", "ClientGone", "InternalError", "as_serve_error"]


class ServeError(NnrtError):
    """A request failed; ``status`` is the HTTP status, ``grpc_code`` the name of the gRPC status code."""

    status = 500
    grpc_code = "INTERNAL"


class BadRequest(ServeError, InputError):
    status, grpc_code = 400, "INVALID_ARGUMENT"


class ModelNotFound(ServeError):
    status, grpc_code = 404, "NOT_FOUND"


class Unavailable(ServeError):
    """The model is not ready or its queue is full: retry later."""

    status, grpc_code = 503, "UNAVAILABLE"


class PayloadTooLarge(ServeError, InputError):
    status, grpc_code = 413, "RESOURCE_EXHAUSTED"


class Unauthorized(ServeError):
    status, grpc_code = 401, "UNAUTHENTICATED"


class DeadlineExceeded(ServeError):
    status, grpc_code = 504, "DEADLINE_EXCEEDED"


class ClientGone(ServeError):
    """The client went away; nobody reads this answer."""

    status, grpc_code = 499, "CANCELLED"


class InternalError(ServeError):
    status, grpc_code = 500, "INTERNAL"


def as_serve_error(e: BaseException) -> ServeError:
    """``e`` as the answer it gets: nnrt's own errors keep their message
    (bad feeds 400, deadlines 504); anything else is a 500 naming its type
    and message, never a traceback."""
    if isinstance(e, ServeError):
        return e
    if isinstance(e, RunTimeoutError):
        return DeadlineExceeded(str(e))
    if isinstance(e, RunCancelledError):
        return ClientGone(str(e))
    if isinstance(e, (InputError, ConfigError)):
        return BadRequest(str(e))
    if isinstance(e, MemoryError):
        return PayloadTooLarge(f"{type(e).__name__}: {e}")
    return InternalError(f"{type(e).__name__}: {e}")
