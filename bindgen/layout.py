"""Verifies a rendered module against clang's layouts: every record's size, alignment, field offsets
and bitfield positions. Runs during generation; any mismatch fails the run."""

from __future__ import annotations

import ctypes
import keyword
import re
import sys
import types
from collections.abc import Sequence

from bindgen_rt.lazy import INDEX_MARK, LAYOUTS_MARK, POINTERS_MARK, NotInParts
from bindgen_rt.lazy import compile_in_parts as _parts
from bindgen_rt.placement import _bit_position

from . import ir
from .errors import LayoutError

# CPython before 3.13 has no way to give a ctypes type an alignment above 16 (no `_align_`).
MAX_CTYPES_ALIGN = 16


def load_module_text(
    text: str,
    name: str,
    defs: str | None = None,
    code: Sequence[types.CodeType] | None = None,
) -> types.ModuleType:
    """Executes generated module text as a module named ``name`` (not added to sys.modules);
    ``defs`` is the text of a lazy module's definitions module, which it then reads from memory
    (every definition is still compiled and run only when first used). ``code``: ``text``
    compiled already (:func:`compile_in_parts`), run part after part."""
    mod = types.ModuleType(name)
    mod.__file__ = f"<bindgen:{name}>"
    if defs is not None:
        mod.__dict__["__bindgen_source__"] = defs
    for part in code if code is not None else compile_in_parts(text, mod.__file__):
        exec(part, mod.__dict__)
    return mod


def compile_in_parts(src: str | bytes, filename: str) -> list[types.CodeType]:
    """``src`` compiled as consecutive runs of whole top-level statements
    (:func:`bindgen_rt.lazy.compile_in_parts`), or whole where it does not split that way, so a
    syntax error is raised as compiling the whole text raises it (same message and line)."""
    text = src.decode("utf-8", "surrogateescape") if isinstance(src, bytes) else src
    try:
        return list(_parts(text, filename))
    except NotInParts:
        return [compile(src, filename, "exec")]


# A statement valid by its form: NAME = <decimal or hex integer>, perhaps with a trailing comment
# (most of a register header). ``\r`` would end the comment for Python, NUL is refused.
_INT_ASSIGNMENT = re.compile(
    rb"([A-Za-z_][A-Za-z0-9_]*) = (?:0[xX](?:_?[0-9a-fA-F])+|[1-9](?:_?[0-9])*|0(?:_?0)*)"
    rb"(?:  #[^\n\r\0]*)?"
)
_KEYWORDS = frozenset(k.encode() for k in [*keyword.kwlist, "__debug__"])  # not assignable


def left_to_compile(defs: str, m: ir.Module) -> bytes:
    """A lazy definitions module as bytes, with ``pass`` (and as many line ends) in place of each
    statement already checked otherwise: those :func:`verify_module` had the lazy loader compile
    (each non-opaque record's class and ``_layout_`` call) and integer assignments, valid by their
    form (``_INT_ASSIGNMENT``; the loader reads them without compiling too). Compiling the rest
    checks every other statement, the module's header and the comments between, at the same line
    numbers; a ``pass`` is no expression, so a neighbour left open still fails."""
    data = defs.encode()
    at = data.rfind(INDEX_MARK.encode())
    layouts_at = data.find(LAYOUTS_MARK.encode(), at)
    if at < 0 or layouts_at < 0:
        return data  # no index: nothing was compiled apart
    layouts_end = data.find(POINTERS_MARK.encode(), layouts_at)
    if layouts_end < 0:
        layouts_end = len(data)
    verified = {rec.name.encode() for rec in m.records if not rec.opaque}
    literal = _INT_ASSIGNMENT.fullmatch
    spans: list[tuple[int, int, bytes]] = []  # (offset, end, replacement)
    # "#@ NAME LINE OFFSET LENGTH" lines after the index's title line: five tokens each
    for toks, layouts in (
        (data[data.find(b"\n", at + 1) : layouts_at].split(), False),
        (data[layouts_at + len(LAYOUTS_MARK) : layouts_end].split(), True),
    ):
        for name, off, end in zip(
            toks[1::5], map(int, toks[3::5]), map(int, toks[4::5]), strict=True
        ):
            end += off
            if name in verified:
                spans.append((off, end, b"pass" + b"\n" * data.count(b"\n", off, end)))
            elif not layouts and (lit := literal(data, off, end)) and lit[1] not in _KEYWORDS:
                spans.append((off, end, b"pass"))  # (one line: the pattern has no line end)
    spans.sort()
    parts, pos = [], 0
    for off, end, instead in spans:
        if off < pos:  # overlapping statements: the index is not this renderer's, keep it whole
            return data
        parts += [data[pos:off], instead]
        pos = end
    parts.append(data[pos:])
    return b"".join(parts)


def verify_module(mod: types.ModuleType, m: ir.Module) -> int:
    """Checks each non-opaque record of ``m`` in ``mod``; returns how many checks passed."""
    problems: list[str] = []
    checks = 0
    for rec in m.records:
        if rec.opaque:
            continue
        cls = getattr(mod, rec.name, None)
        if cls is None:
            problems.append(f"{rec.name}: not defined by the module")
            continue
        size, align = ctypes.sizeof(cls), ctypes.alignment(cls)
        checks += 2
        if size != rec.size:
            problems.append(f"{rec.name}: size {size}, clang says {rec.size}")
        want_align = (
            min(rec.align or 1, MAX_CTYPES_ALIGN) if sys.version_info < (3, 13) else rec.align
        )
        if align != want_align:
            problems.append(f"{rec.name}: alignment {align}, clang says {rec.align}")
        for f in rec.fields:
            checks += 1
            attr = cls.__dict__.get(f.name)
            if f.bit_width is not None:
                if f.bit_width == 0:
                    continue
                if hasattr(attr, "mask"):  # a bitfield descriptor of bindgen_rt
                    where = (attr.lo * 8 + attr.shift, attr.mask.bit_length())
                elif hasattr(attr, "offset"):  # a native ctypes bitfield
                    where = _bit_position(attr)
                else:
                    where = None
                if where != (f.bit_offset, f.bit_width):
                    problems.append(
                        f"{rec.name}.{f.name}: bitfield not at bit {f.bit_offset} "
                        f"width {f.bit_width}{_member(rec, f)}"
                    )
                continue
            off = getattr(attr, "offset", None)
            if off is None or off * 8 != f.bit_offset:
                got = "missing from the class" if off is None else f"offset {off}"
                problems.append(
                    f"{rec.name}.{f.name}: {got}, clang says {f.bit_offset // 8}"
                    f"{_member(rec, f)}"
                )
    if problems:
        shown = "\n  ".join(problems[:40])
        more = f"\n  ... and {len(problems) - 40} more" if len(problems) > 40 else ""
        raise LayoutError(
            f"target {m.target}: {len(problems)} layout mismatch(es) against clang:\n  "
            f"{shown}{more}\n"
            "The generated classes would not match the C layout, so nothing was written. This is "
            "a bindgen bug: please report it with the header. To generate the rest meanwhile, "
            "drop the record with a `drop` patch in the spec (see docs/spec-format.md)."
        )
    return checks


def _member(rec: ir.Record, f: ir.Field) -> str:
    """Which C member a field came from: synthesized names (``_anon3``) mean nothing to a user."""
    if f.anonymous:
        what = "the anonymous struct/union member"
    else:
        what = f"C member {f.name}"
    where = f" at {f.loc}" if f.loc else ""
    return f" ({what}{where}, in {rec.c_name or rec.name})"
