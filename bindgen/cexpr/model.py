"""The data macro translation takes and gives (public), and why a macro is not translated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .. import ir


# The names generated function bodies may call; bindgen_rt defines them.
MACRO_HELPERS = (
    "_c_arg",
    "_c_bool",
    "_c_div",
    "_c_mod",
    "_c_op",
    "_c_ret",
    "_c_sext",
    "_c_trunc",
    "_c_un",
)


# ---------------------------------------------------------------- public data


@dataclass(frozen=True)
class MacroDef:
    """One ``#define`` as libclang tokenizes it.

    ``params`` is None for an object-like macro and a tuple (possibly empty) for a function-like
    one; a last parameter ``...`` makes it variadic. ``body`` holds the token spellings of the
    replacement list.
    """

    name: str
    params: tuple[str, ...] | None
    body: tuple[str, ...]
    loc: ir.Location | None = None


@dataclass(frozen=True)
class CType:
    """An arithmetic or pointer C type as far as macros need it (records appear with their size)."""

    size: int
    signed: bool
    is_float: bool = False
    is_pointer: bool = False


@dataclass(frozen=True)
class MacroOptions:
    """Per-target knobs (from the spec's ``macros`` section)."""

    bit_ranges: bool = False  # a top-level ``hi:lo`` body becomes the tuple (hi, lo)
    range_wrappers: tuple[str, ...] = ()  # ``MW(hi:lo)``: such calls are transparent
    # Extra definitions ("NAME" or "NAME(a, b)" → body text) used while evaluating, never emitted.
    # They replace a header definition of the same name (also for that macro's own translation).
    predefined: Mapping[str, str] = field(default_factory=dict)
    skip: tuple[tuple[str, str], ...] = ()  # (regex searched in the macro name, reason)


@dataclass(frozen=True)
class MacroContext:
    """What the translation unit declares that macros may refer to."""

    types: Mapping[str, CType] = field(default_factory=dict)  # "NvU32", "struct foo", ...
    # name → (value, type). Constants whose value fits int are treated as int, as C11 6.7.2.2 and
    # gcc do, whatever the enum's underlying type.
    enum_constants: Mapping[str, tuple[int, CType]] = field(default_factory=dict)
    record_names: Mapping[str, str] = field(default_factory=dict)  # C spelling → Python class


@dataclass
class MacroResult:
    """Every emitted macro lands in exactly one of these lists, in input order."""

    constants: list[ir.Constant] = field(default_factory=list)
    functions: list[ir.MacroFunction] = field(default_factory=list)
    ioctls: list[ir.Ioctl] = field(default_factory=list)
    skipped: list[ir.Skipped] = field(default_factory=list)


class _Fail(Exception):
    """Why something cannot be translated.

    ``contextual`` failures say the tokens are not an expression on their own (a type, a range, a
    lone function-like macro name, ...); inside a larger expansion they may still be fine, so a
    reference to such a macro is expanded textually instead of failing.
    """

    def __init__(self, reason: str, contextual: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.contextual = contextual
