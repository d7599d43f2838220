"""Verifies a rendered module against clang's layouts: every record's size, alignment, field offsets
and bitfield positions. Runs during generation; any mismatch fails the run."""

from __future__ import annotations

import ctypes
import sys
import types

from bindgen_rt.lazy import INDEX_MARK, LAYOUTS_MARK
from bindgen_rt.placement import _bit_position

from . import ir
from .errors import LayoutError

# CPython before 3.13 has no way to give a ctypes type an alignment above 16 (no `_align_`).
MAX_CTYPES_ALIGN = 16


def load_module_text(
    text: str, name: str, defs: str | None = None, code: types.CodeType | None = None
) -> types.ModuleType:
    """Executes generated module text as a module named ``name`` (not added to sys.modules);
    ``defs`` is the text of a lazy module's definitions module, which it then reads from memory
    (every definition is still compiled and run only when first used). ``code``: ``text``
    compiled already."""
    mod = types.ModuleType(name)
    mod.__file__ = f"<bindgen:{name}>"
    if defs is not None:
        mod.__dict__["__bindgen_source__"] = defs
    exec(code or compile(text, mod.__file__, "exec"), mod.__dict__)
    return mod


def not_yet_compiled(defs: str, m: ir.Module) -> bytes:
    """A lazy definitions module as bytes, with the statements :func:`verify_module` had the lazy
    loader compile (each non-opaque record's class and ``_layout_`` call, most of a large module)
    turned into blank lines: compiling this as well checks every statement once, at the same line
    numbers."""
    data = defs.encode()
    at = data.rfind(INDEX_MARK.encode())
    layouts_at = data.find(LAYOUTS_MARK.encode(), at)
    if at < 0 or layouts_at < 0:
        return data  # no index: nothing was compiled apart
    verified = {rec.name.encode() for rec in m.records if not rec.opaque}
    spans = []
    # "#@ NAME LINE OFFSET LENGTH" lines after the index's title line: five tokens each
    for toks in (
        data[data.find(b"\n", at + 1) : layouts_at].split(),
        data[layouts_at + len(LAYOUTS_MARK) :].split(),
    ):
        for i in range(0, len(toks) - 4, 5):
            if toks[i + 1] in verified:
                spans.append((int(toks[i + 3]), int(toks[i + 4])))
    parts, pos = [], 0
    for off, length in sorted(set(spans)):
        if off < pos:  # overlapping statements: the index is not this renderer's, keep it whole
            return data
        parts += [data[pos:off], b"\n" * data.count(b"\n", off, off + length)]
        pos = off + length
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
