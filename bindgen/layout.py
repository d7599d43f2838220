"""Verifies a rendered module against clang's layouts: every record's size, alignment, field offsets
and bitfield positions. Runs during generation; any mismatch fails the run."""

from __future__ import annotations

import ctypes
import sys
import types

from . import ir
from bindgen_rt.placement import _bit_position

from .errors import LayoutError

# CPython before 3.13 has no way to give a ctypes type an alignment above 16 (no `_align_`).
MAX_CTYPES_ALIGN = 16


def load_module_text(text: str, name: str, defs: str | None = None) -> types.ModuleType:
    """Executes generated module text as a module named ``name`` (not added to sys.modules);
    ``defs`` is the text of a lazy module's definitions module, which it then reads from memory
    (every definition is still compiled and run only when first used)."""
    mod = types.ModuleType(name)
    mod.__file__ = f"<bindgen:{name}>"
    if defs is not None:
        mod.__dict__["__bindgen_source__"] = defs
    code = compile(text, mod.__file__, "exec")
    exec(code, mod.__dict__)
    return mod


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
