"""C enums as Python enum classes, for targets that ask for them (a spec's ``enums: IntEnum``).

A C enum type holds any value of its underlying integer type, not only its enumerators: a C
library may return a value a newer header added, or combine flags. So converting a value read from
C (``color(s.c)``) never raises: a value without an enumerator gives a member without a name
(``<color: 99>``), equal to the int, and a flag set keeps bits no enumerator names. Loaded on
first use (``bindgen_rt.CEnum``): importing ``enum`` is a cost that targets without enum classes
do not pay.
"""

import enum as _enum

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class CEnum(_enum.IntEnum):
    """An IntEnum whose conversion from an int without an enumerator gives an unnamed member."""

    @classmethod
    def _missing_(cls, value: "Any") -> "Any":
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        member = int.__new__(cls, value)
        member._name_ = None  # type: ignore[assignment]
        member._value_ = value
        return member

    def __repr__(self) -> str:
        if self._name_ is None:
            return f"<{type(self).__name__}: {int(self)}>"
        return super().__repr__()


class CFlag(_enum.IntFlag, boundary=_enum.KEEP):
    """An IntFlag that keeps the bits no enumerator names (C flag sets grow between versions)."""
