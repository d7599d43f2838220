"""Pass ``macro_records``: records synthesised from field macros, for headers that describe packets
only with macros. Reads the spec's ``macros.records`` rules and ``Module.constants``; appends to
``Module.records``.

AMD's SDMA header, for example, gives each packet field as ``<PKT>_<DWORD>_<field>_offset`` (dword
index), ``_mask`` (unshifted) and ``_shift``; the spec's ``macros.records`` rule turns each packet
into a struct of 32-bit words with one bitfield per field, verified like any other record.
"""

from __future__ import annotations

import re

from .. import ir
from ..errors import BindgenError
from ..spec import Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import Context

_U32 = ir.Prim("c_uint32", 4, 4)


def build(ctx: Context) -> None:
    """The pass: see :func:`build_macro_records`."""
    if ctx.target.macros.enabled and ctx.target.macros.records:
        build_macro_records(ctx.target, ctx.module)


def build_macro_records(t: Target, m: ir.Module) -> None:
    """Appends one record per packet the target's ``macros.records`` rules find among the
    constants (nothing when the target has no such rule)."""
    values = {c.name: c.value for c in m.constants if isinstance(c.value, int)}
    for rule in t.macros.records:
        anchor = re.compile(rule.anchor)
        recs = sorted(
            {mt.group("rec") for n in values if (mt := anchor.fullmatch(n))},
            key=lambda r: (-len(r), r),
        )
        fields_rx = re.compile(rule.fields)
        parts: dict[str, dict[tuple[str, str], dict[str, int]]] = {r: {} for r in recs}
        for name in sorted(values):
            rec = next((r for r in recs if name.startswith(r + "_")), None)
            if rec is None:
                continue
            mt = fields_rx.fullmatch(name[len(rec) + 1 :])
            if not mt:
                continue
            key = (mt.group("dword"), mt.group("field"))
            parts[rec].setdefault(key, {})[mt.group("kind")] = values[name]
        existing = {r.name for r in m.records}
        for rec in recs:
            fields: list[ir.Field] = []
            used: set[str] = set()
            for (dword, fname), kinds in sorted(
                parts[rec].items(), key=lambda kv: (kv[1].get("offset", 0), kv[1].get("shift", 0))
            ):
                if set(kinds) != {"offset", "mask", "shift"}:
                    raise BindgenError(
                        f"target {t.name}: {rec}_{dword}_{fname} lacks "
                        f"{sorted({'offset', 'mask', 'shift'} - set(kinds))}"
                    )
                mask = kinds["mask"]
                width = mask.bit_length()
                if mask != (1 << width) - 1:
                    raise BindgenError(
                        f"target {t.name}: {rec}_{dword}_{fname}_mask {mask:#x} is "
                        "not a contiguous low mask"
                    )
                name = fname if fname not in used else f"{dword.lower()}_{fname}"
                used.add(name)
                fields.append(ir.Field(name, _U32, kinds["offset"] * 32 + kinds["shift"], width))
            if not fields or rec in existing:
                continue
            ndw = max(f.bit_offset // 32 for f in fields) + 1
            m.records.append(
                ir.Record(rec, "struct", ndw * 4, 4, tuple(fields), c_name="", loc=None)
            )
        m.records.sort(key=lambda r: r.name)
