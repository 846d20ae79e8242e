"""A capability answer computed when first read (:class:`DeferredCapability`).

The build asks the backup backend about every node only when something needs
the answer: a node no selected backend claims, a pin, a scheduler that looks
at the backup, or the placement report (which lists every backend's
rejections and is itself computed when first read).  In a fresh process this
skips importing the backup's kernel modules for a model its preferred backend
runs whole.  The answer is the backend's ``capability()``, unchanged.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from nnrt_core.backend.base import Capability

__all__ = ["DeferredCapability"]

#: the slot descriptors of Capability's fields (the subclass's properties shadow them)
_SLOTS = {name: Capability.__dict__[name] for name in ("supported", "rejected", "fault")}


def _field(name: str) -> property:
    slot = _SLOTS[name]

    def get(self: DeferredCapability) -> Any:
        self.resolve()
        return slot.__get__(self, Capability)

    def put(self: DeferredCapability, value: Any) -> None:
        self.resolve()
        slot.__set__(self, value)

    return property(get, put, doc=f"``Capability.{name}``, computed on first read")


class DeferredCapability(Capability):
    """``backend``'s :class:`Capability`, from ``compute()`` when a field (or
    ``supports``/``reason``, ``==``, ``repr``) is first read; thread-safe,
    computed once.  Pickles and compares as the plain answer."""

    __slots__ = ("__dict__",)
    supported = _field("supported")
    rejected = _field("rejected")
    fault = _field("fault")

    def __init__(self, backend: str, compute: Callable[[], Capability]) -> None:
        self.backend = backend
        self.__dict__["compute"] = compute
        self.__dict__["lock"] = threading.Lock()

    @property
    def pending(self) -> bool:
        """``True`` while the answer has not been computed."""
        return "compute" in self.__dict__

    def resolve(self) -> None:
        """Compute the answer now (once; later calls return at once)."""
        if "compute" not in self.__dict__:
            return
        with self.__dict__["lock"]:
            compute = self.__dict__.get("compute")
            if compute is None:  # another thread computed it
                return
            cap = compute()
            for name, slot in _SLOTS.items():
                slot.__set__(self, getattr(cap, name))
            del self.__dict__["compute"]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Capability):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return Capability, tuple(self.as_dict().values())

    def replace(self, **changes: Any) -> Capability:
        """A plain :class:`Capability` with ``changes`` applied."""
        return Capability(**{**self.as_dict(), **changes})
