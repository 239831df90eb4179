"""An enum whose members are declared where they are used: the names of sources.

``SourceKind`` and ``Source`` were closed ``StrEnum``s, so a new source had to edit the enum, and with it
the state's fingerprint and the schemas. An ``OpenEnum`` is a ``str`` (its wire text is itself), its
members are declared once with ``declare`` (the built-in ones beside the class, a new source's in its
own module), and looking a value up (``Kind("x")``) accepts only declared members, like an enum.
Members are interned, so ``is`` compares them as it compares enum members.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, TypeVar

_T = TypeVar("_T", bound="OpenEnum")
_Member = TypeVar("_Member")


class _Members(type):
    """Iterating the class gives its members in declaration order, as an enum class does."""

    def __iter__(cls: type[_Member]) -> Iterator[_Member]:
        members: dict[str, _Member] = getattr(cls, "_members", {})
        return iter(tuple(members.values()))

    def __len__(cls) -> int:
        members: dict[str, Any] = getattr(cls, "_members", {})
        return len(members)


class OpenEnum(str, metaclass=_Members):
    __slots__ = ()
    _members: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._members = {}

    def __new__(cls: type[_T], value: str) -> _T:
        member: _T | None = cls._members.get(value)
        if member is None:
            known = ", ".join(cls._members)
            raise ValueError(f"{value!r} is not a {cls.__name__} (known: {known})")
        return member

    @classmethod
    def declare(cls: type[_T], value: str) -> _T:
        """The member ``value``, declared now if it is new (declaring it again returns the same one)."""
        member: _T | None = cls._members.get(value)
        if member is None:
            if not value or value != value.strip():
                raise ValueError(f"{cls.__name__}: {value!r} cannot be a member")
            member = str.__new__(cls, value)
            cls._members[value] = member
        return member

    @classmethod
    def declare_constants(cls, constants: dict[str, str]) -> None:
        """Declare the members named by the class's annotated constants (attribute -> value)."""
        annotated = {name for name, kind in cls.__annotations__.items() if "ClassVar" in str(kind)} - {
            "_members"
        }
        if set(constants) != annotated:
            raise RuntimeError(
                f"{cls.__name__}: constants {sorted(constants)} but annotated {sorted(annotated)}"
            )
        for attribute, value in constants.items():
            setattr(cls, attribute, cls.declare(value))

    @classmethod
    def withdraw(cls, value: str) -> None:
        """Forget a member declared for a while (a test's throwaway source)."""
        cls._members.pop(value, None)

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.value,))

    def __copy__(self: _T) -> _T:
        return self

    def __deepcopy__(self: _T, memo: Any) -> _T:
        return self
