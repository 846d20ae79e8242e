"""The bearer token check shared by the REST routes, the infer fast path and gRPC."""
from __future__ import annotations

import hmac

from nnrt_serve.errors import Unauthorized

__all__ = ["expected_bearer", "require_bearer", "REST_NEEDS"]

#: what a REST request without the right token is told it needs
REST_NEEDS = "'Authorization: Bearer <token>'"


def expected_bearer(token: str | None) -> bytes | None:
    """The ``Authorization`` value a request must carry (``None``: no token, nothing to check)."""
    return None if token is None else f"Bearer {token}".encode()


def require_bearer(given: str, expected: bytes | None, needs: str = REST_NEEDS) -> None:
    """:class:`Unauthorized` (naming ``needs``) unless ``expected`` is ``None`` or
    ``given`` equals it, compared in constant time."""
    if expected is not None and not hmac.compare_digest(given.encode(), expected):
        raise Unauthorized(f"this server needs {needs}")
