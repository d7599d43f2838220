"""C macros → Python constants, functions and ioctl numbers, with C's semantics (gcc, LP64 Linux).

The parser hands over every ``#define`` of a translation unit as libclang token spellings
(:class:`MacroDef`). This module expands them the way the C preprocessor does (object- and
function-like macros, ``#`` and ``##``, hide sets) and evaluates the result with C's rules, so each
Python value is the one gcc computes:

* integer literals get their C11 6.4.4.1 type (``0x80000000`` is ``unsigned int``, ``2147483648``
  is ``long``); ``0755`` is octal; character literals are ``int`` (``'\\xff'`` is -1: char is
  signed on x86);
* arithmetic follows the integer promotions and the usual arithmetic conversions (C11 6.3.1) and
  every result wraps at its type's width and signedness (``~0U`` is 4294967295, ``-1 + 0U`` too);
  ``/`` and ``%`` truncate toward zero; ``!``, ``&&``, ``||`` and comparisons give int 0/1;
* casts and ``sizeof`` of the types in :class:`MacroContext`, ``?:``, the comma operator,
  references to other macros and to enum constants.

What comes out (see :func:`translate_macros`): object-like macros become :class:`ir.Constant`;
``_IO``/``_IOR``/``_IOW``/``_IOWR`` requests (also through vendor wrappers) become
:class:`ir.Ioctl`; NVIDIA's ``hi:lo`` bit ranges become ``(hi, lo)`` tuples when asked for; and
function-like macros whose body is an expression become :class:`ir.MacroFunction`. Their Python
bodies keep C's semantics where the C type is known, by calling these helpers, which the generated
module imports from ``bindgen_rt``:

    _c_div(a, b)      C ``/``: two ints give the quotient truncated toward zero; otherwise a / b.
                      b == 0 raises ZeroDivisionError.
    _c_mod(a, b)      C ``%`` on ints: a - b * _c_div(a, b) (the sign follows the dividend).
    _c_bool(x)        1 if x else 0: results of ``!``, ``&&``, ``||``, comparisons, ``(_Bool)``.
    _c_sext(x, bits)  x wrapped into a signed two's-complement integer of ``bits`` bits (casts to
                      signed types, signed results of ``+ - * <<`` whose type is known).

Unsigned wrapping is written inline as ``(x & 0xffffffff)``. A parameter's C type is unknown (a
macro is generic), so arithmetic on it is plain Python unless a cast or an operand fixes the type:
``((NvU32)(x) << 4)`` wraps, ``((x) - 1U)`` with x = 0 gives -1 where C, for an int x, gives
4294967295. Emitted constants and emitted function macros stay names in function bodies (the
latter only when the arguments' types are unknown too, since the callee's body could not wrap a
typed argument as C would); other macros and enum constants are inlined. Everything that cannot
be translated is listed as skipped with a short, specific reason; nothing is dropped silently.

Cost is linear in the number of macros (NVIDIA's RM headers have ~12,000; ~100,000 with every
class and control header): every object-like macro is expanded, parsed and evaluated once. A later
reference to it is replaced by that evaluated node wherever this is equivalent to textual
expansion (the body is one token or fully parenthesized, or its operators bind at least as tightly
as those around the reference) and expanded textually otherwise. Macros are prepared in
dependency order with an explicit stack, so long chains neither recurse deeply nor repeat work.
Checked against gcc, every integer constant is equal: 71,922 from NVIDIA's SDK headers (all class
and control headers of open-gpu-kernel-modules) and all of linux/pci_regs.h, vfio.h, stat.h and
io_uring.h; so are 12,093 of 12,095 calls of those NVIDIA function macros, the other two being
the ``(x) - 1U`` case above.

The layers, each a module of this package (the arrow never points backwards):

* ``model``: the data given and returned (:class:`MacroDef`, :class:`MacroContext`, ...);
* ``ctype`` and ``literals``: C's arithmetic types, conversions and literals;
* ``tokens`` and ``preprocess``: preprocessing tokens and macro expansion;
* ``parser`` and ``nodes``: expressions parsed into typed nodes that evaluate with C's rules
  (the evaluator) and spell themselves as Python through ``emit`` (the Python emitter);
* ``translate``: the driver, per macro in dependency order, and :func:`translate_macros`.
"""

from __future__ import annotations

from .model import MACRO_HELPERS, CType, MacroContext, MacroDef, MacroOptions, MacroResult
from .tokens import tokenize
from .translate import translate_macros

__all__ = [
    "CType",
    "MacroContext",
    "MacroDef",
    "MacroOptions",
    "MacroResult",
    "MACRO_HELPERS",
    "tokenize",
    "translate_macros",
]
