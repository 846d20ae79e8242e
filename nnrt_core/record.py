"""``Record`` / ``FrozenRecord``: plain-class bases for the small value types
that a session defines at import, in place of ``@dataclass``.

Why: ``@dataclass`` writes and ``exec``s the source of ``__init__``,
``__repr__``, ``__eq__`` (and, frozen, ``__setattr__``, ``__delattr__``,
``__hash__``) for every class when its module is imported: ~0.4 ms a class,
~17 ms of the 41 a file session on ONNX Runtime used to define.  A record
lists its fields in ``__slots__`` (in ``__init__`` order; a subclass's after
its record base's) and writes its own ``__init__`` (compiled once into the
``.pyc``); these bases add what the dataclass gave, from the slots:

* ``repr``: ``Name(field=value, ...)``;
* ``==``: same class and equal field tuples (else ``NotImplemented``);
  ``Record`` instances are unhashable, like ``@dataclass(eq=True)``;
* ``replace(**changes)``: a new instance through ``__init__`` (an unknown
  name is a ``TypeError``, like ``dataclasses.replace``);
* ``fields()`` (the names) and ``as_dict()`` (shallow);
* pickling and ``copy``: rebuilt through ``__init__`` with the fields in order.

``FrozenRecord`` also refuses assignment and deletion
(:class:`FrozenInstanceError`, an ``AttributeError``) and hashes its field
tuple.  Its ``__init__`` sets fields with ``object.__setattr__``.  A class
that needs a ``__dict__`` (extra attributes) puts ``"__dict__"`` last in
``__slots__``; it is not a field.
"""
from __future__ import annotations

from operator import attrgetter
from typing import Any

__all__ = ["FrozenInstanceError", "FrozenRecord", "Record"]


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a :class:`FrozenRecord`."""


class Record:
    """Base of a mutable record (see the module docstring)."""

    __slots__ = ()
    #: the field names (the ``__slots__`` of the class and its record bases, bases first)
    FIELDS: tuple[str, ...] = ()
    #: ``obj -> tuple of its field values`` (an ``attrgetter``, set per class)
    _getter: Any = staticmethod(lambda obj: ())

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__slots__", ())
        own = (own,) if isinstance(own, str) else tuple(own)
        cls.FIELDS = cls.FIELDS + tuple(n for n in own if n not in ("__dict__", "__weakref__"))
        get = attrgetter(*cls.FIELDS) if cls.FIELDS else (lambda obj: ())
        cls._getter = staticmethod(get if len(cls.FIELDS) != 1 else (lambda obj: (get(obj),)))

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The field names, in ``__init__`` order."""
        return cls.FIELDS

    def _values(self) -> tuple[Any, ...]:
        return self._getter(self)

    def _key(self) -> tuple[Any, ...]:
        """What ``==`` and ``hash`` compare: every field unless a class says otherwise."""
        return self._values()

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.FIELDS)
        return f"{type(self).__qualname__}({body})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` applied, built through ``__init__``."""
        names = self.FIELDS
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {unknown[0]!r} (fields: {', '.join(names)})")
        return type(self)(**{n: changes[n] if n in changes else getattr(self, n) for n in names})

    def as_dict(self) -> dict[str, Any]:
        """Field name -> value (shallow, unlike ``dataclasses.asdict``)."""
        return dict(zip(self.FIELDS, self._getter(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), self._values()


class FrozenRecord(Record):
    """Base of an immutable, hashable record (see the module docstring)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r} of {type(self).__qualname__}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r} of {type(self).__qualname__}")

    def __hash__(self) -> int:
        return hash(self._key())
