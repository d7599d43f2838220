"""Format-converting buffer accesses: MUBUF buffer_{load,store}[_d16[_hi]]_format_* (the data
format and component selects from the V#) and MTBUF tbuffer_* (the format from the instruction,
component selects the identity), plus the MUBUF loads into LDS.

RDNA3 ISA sections 9.3-9.6: the V#'s dword3 holds DST_SEL_X/Y/Z/W [11:0] (3 bits each: 0 = 0,
1 = 1, 4-7 = the element's X/Y/Z/W; 2 and 3 are reserved) and FORMAT [17:12]. An element is
the whole format (`buffer_formats`), range-checked all or nothing with the format's size as the
payload (section 9.4.1, note 3), through the same V# addressing and OOB_SELECT rules as the
other MUBUF accesses (`ops_buffer.BufferLanes`). An out-of-range load returns 0 in every
component except those whose select is SEL_1, which return 1; an out-of-range store writes
nothing. FORMAT 0 (INVALID) is an unbound V#: loads return 0 and stores write nothing.
Formatted accesses must be aligned to min(element size, 4) bytes (section 9.5); a misaligned
in-range lane is a memory violation.

Component counts (section 9.3.2): a load of more components than the format has returns what
the selects name (a select of a component the format lacks gives 0, as the MTBUF identity
select X000 / XY00 / XYZ0 does); a store writes every component of the format, each taken from
the VGPR component its select names (0 for one the instruction does not supply).

Loads into LDS (buffer_load_lds_*): the RDNA3 document lists no MUBUF opcodes 45-50, but LLVM's
gfx11 tables hold them. The model is the one AMD documents for the MUBUF LDS loads of GCN and
CDNA (CDNA3 ISA section 9.1.9): each active lane writes one dword at LDS_base + M0[15:0] +
instruction offset + lane * 4 (lanes 0-63 in a wave64), the loaded value extended to 32 bits (the i8/i16 forms sign
extend, which is why both signed and unsigned forms exist); out-of-range lanes write 0.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from runtime.drivers.mock.memory import PageFault

from . import buffer_formats as bf
from . import mem_lanes as ml
from .decode import Inst
from .errors import KernelFault, PageFaultError
from .machine import WaveSet
from .ops_buffer import BufferLanes, _descriptor_lanes
from .ops_ds import lds_target
from .ops_mem import _SIZES, _fault, m0_of, mem_op

Exec = Callable[[WaveSet], None]
u16, u32, u64 = np.uint16, np.uint32, np.uint64
SEL_0, SEL_1 = 0, 1
_COUNT = {"x": 1, "xy": 2, "xyz": 3, "xyzw": 4}


def compile_format(inst: Inst) -> Exec:
    """buffer_*_format_* and tbuffer_*_format_*: loads and stores with format conversion."""
    name, f = inst.name, inst.f
    if f["tfe"]:
        raise KernelFault("unsupported instruction (buffer access with TFE is not modelled)",
                          address=inst.addr, instruction=str(inst))
    parts = name.split("_")
    kind = parts[1]                       # load | store
    count = _COUNT[parts[-1]]
    d16 = "hi" if "d16_hi" in name else "lo" if "d16" in name else None
    typed = inst.enc == "MTBUF"
    fixed = _format(inst, f["format"]) if typed else None
    lanes = _descriptor_lanes(inst)
    vdata = f["vdata"]
    body = _load if kind == "load" else _store

    def run(g: WaveSet) -> None:
        if not g.active:
            return
        bl = lanes(g)
        w3 = g.s(f["srsrc"] + 3).astype(np.int64)
        codes = np.full(g.n, fixed.code) if fixed else (w3 >> 12) & 0x3F
        sels = np.tile(np.arange(4) + 4, (g.n, 1)) if typed else \
            (w3[:, None] >> (3 * np.arange(4))) & 7
        live = g.exec.any(axis=1)
        # One pass per distinct (format, selects) among the waves: usually exactly one.
        keys = np.concatenate([codes[:, None], sels], axis=1)
        for key in np.unique(keys[live], axis=0):
            waves = (keys == key).all(axis=1)
            mask = g.exec & waves[:, None]
            code, sel = int(key[0]), [int(s) for s in key[1:]]
            if code == bf.INVALID:   # unbound V#: loads return 0, stores write nothing
                if kind == "load":
                    _load(g, inst, bl, None, [SEL_0] * 4, mask, np.zeros_like(mask), count,
                          d16, vdata)
                continue
            fmt = _format(inst, code)
            used = sel[:count] if kind == "load" else sel[:fmt.count]
            if any(s in (2, 3) for s in used):
                raise KernelFault(f"V# DST_SEL {sel} uses a reserved select (2 or 3)",
                                  address=inst.addr, instruction=str(inst))
            body(g, inst, bl, fmt, sel, mask, mask & bl.in_range(0, fmt.size_B), count, d16,
                 vdata)
    return run


def _format(inst: Inst, code: int) -> bf.BufFormat:
    fmt = bf.FORMATS.get(code)
    if fmt is None:
        raise KernelFault(f"data format {code} is not a buffer format (RDNA3 ISA Table 52: "
                          "1-63; 0 is INVALID)", address=inst.addr, instruction=str(inst))
    return fmt


def _addresses(g: WaveSet, inst: Inst, bl: BufferLanes, ok: np.ndarray, size: int) -> np.ndarray:
    """The byte addresses (uint64 [k]) of the in-range lanes, checked for alignment."""
    addrs = (bl.base[:, None] + bl.boff)[ok]
    align = min(size, 4)
    if (addrs % u64(align)).any():
        bad = int(addrs[np.argmax(addrs % u64(align) != 0)])
        raise PageFaultError(f"memory violation: formatted access of {size} B at {bad:#x} is "
                             f"not {align}-byte aligned (RDNA3 ISA section 9.5)",
                             address=inst.addr, instruction=str(inst))
    return addrs


def _read(g: WaveSet, inst: Inst, addrs: np.ndarray, size: int) -> np.ndarray:
    try:
        return g.m.mem.gather(addrs, np.dtype((np.void, size))).view(np.uint8).reshape(-1, size)
    except PageFault as e:
        raise _fault(inst, e) from None


def _load_components(fmt: bf.BufFormat, sel: list[int], raw: np.ndarray, count: int,
                     half: bool) -> list[np.ndarray]:
    """The `count` VGPR components (uint32, or uint16 for d16) of in-range elements."""
    comps = bf.components(fmt, raw)
    conv = bf.load16 if half else bf.load32
    out = []
    for c in range(count):
        s = sel[c]
        if s >= 4 and s - 4 < fmt.count:
            out.append(conv(fmt, comps[s - 4], fmt.bits[s - 4]).astype(u32))
        else:
            out.append(np.full(len(raw), fmt.one(half) if s == SEL_1 else 0, dtype=u32))
    return out


def _load(g: WaveSet, inst: Inst, bl: BufferLanes, fmt: bf.BufFormat | None, sel: list[int],
          mask: np.ndarray, ok: np.ndarray, count: int, d16: str | None, vdata: int) -> None:
    half = d16 is not None
    vals = [np.zeros((g.n, 32), dtype=u32) for _ in range(count)]
    for c in range(count):   # out-of-range lanes: 0, or 1 where the select is SEL_1
        if sel[c] == SEL_1 and fmt is not None:
            vals[c][:] = fmt.one(half)
    if ok.any() and fmt is not None:
        raw = _read(g, inst, _addresses(g, inst, bl, ok, fmt.size_B), fmt.size_B)
        for c, v in enumerate(_load_components(fmt, sel, raw, count, half)):
            vals[c][ok] = v
    if not half:
        for c in range(count):
            g.set_v_lanes(vdata + c, vals[c], mask)
        return
    if d16 == "hi":
        g.set_v_lanes(vdata, (g.v(vdata) & u32(0xFFFF)) | (vals[0] << u32(16)), mask)
        return
    for r in range((count + 1) // 2):
        lo = vals[2 * r]
        hi = vals[2 * r + 1] << u32(16) if 2 * r + 1 < count else g.v(vdata + r) & u32(0xFFFF0000)
        g.set_v_lanes(vdata + r, lo | hi, mask)


def _store(g: WaveSet, inst: Inst, bl: BufferLanes, fmt: bf.BufFormat, sel: list[int],
           mask: np.ndarray, ok: np.ndarray, count: int, d16: str | None, vdata: int) -> None:
    if not ok.any():
        return
    if d16 is None:
        given = [g.v(vdata + c)[ok] for c in range(count)]
    elif d16 == "hi":
        given = [g.v(vdata)[ok] >> u32(16)]
    else:
        given = [(g.v(vdata + c // 2)[ok] >> u32(16 * (c % 2))) & u32(0xFFFF)
                 for c in range(count)]
    k = len(given[0])
    conv = bf.store16 if d16 else bf.store32
    comps = []
    for m in range(fmt.count):
        s = sel[m]
        if s >= 4 and s - 4 < count:
            v = given[s - 4]
        else:
            v = np.full(k, fmt.one(d16 is not None) if s == SEL_1 else 0, dtype=u32)
        comps.append(conv(fmt, v, fmt.bits[m]))
    raw = bf.element(fmt, comps)
    addrs = _addresses(g, inst, bl, ok, fmt.size_B)
    try:
        g.m.mem.scatter(addrs, raw.view(np.dtype((np.void, fmt.size_B)))[:, 0])
    except PageFault as e:
        raise _fault(inst, e) from None


def compile_load_lds(inst: Inst) -> Exec:
    """buffer_load_lds_{u8,i8,u16,i16,b32,format_x}: memory to LDS, one dword per lane."""
    name, f = inst.name, inst.f
    if f["tfe"]:
        raise KernelFault("unsupported instruction (buffer access with TFE is not modelled)",
                          address=inst.addr, instruction=str(inst))
    lanes = _descriptor_lanes(inst)
    fmt_load = name.endswith("format_x")
    typ = "b32" if fmt_load else mem_op(name).typ
    size = 0 if fmt_load else _SIZES[typ]
    imm = f["offset"]
    lane4 = (np.arange(32, dtype=u32) * u32(4))[None, :]

    def lds_addr(g: WaveSet) -> np.ndarray:
        a = (m0_of(g) & u32(0xFFFF))[:, None] + u32(imm) + lane4
        if g.m.wave64:   # the odd row of a wave64 holds lanes 32-63
            a = a + ((g.wave_ids() & 1) * 128).astype(u32)[:, None]
        return a

    target = lds_target(inst, lds_addr, 4)

    def run(g: WaveSet) -> None:
        if not g.active:
            return
        bl = lanes(g)
        vals = np.zeros((g.n, 32), dtype=u32)
        if fmt_load:
            w3 = g.s(f["srsrc"] + 3).astype(np.int64)
            codes = (w3 >> 12) & 0x3F
            sels = (w3[:, None] >> (3 * np.arange(4))) & 7
            live = np.nonzero(g.exec.any(axis=1))[0]
            for w in live:
                mask = np.zeros_like(g.exec)
                mask[w] = g.exec[w]
                if codes[w] == bf.INVALID:
                    continue
                fmt = _format(inst, int(codes[w]))
                sel = [int(s) for s in sels[w]]
                if sel[0] in (2, 3):
                    raise KernelFault(f"V# DST_SEL {sel} uses a reserved select (2 or 3)",
                                      address=inst.addr, instruction=str(inst))
                ok = mask & bl.in_range(0, fmt.size_B)
                if sel[0] == SEL_1:
                    vals[w] = fmt.one(False)
                if ok.any():
                    raw = _read(g, inst, _addresses(g, inst, bl, ok, fmt.size_B), fmt.size_B)
                    vals[ok] = _load_components(fmt, sel, raw, 1, False)[0]
        else:
            ok = g.exec & bl.in_range(0, size)
            if ok.any():
                addrs = (bl.base[:, None] + bl.boff)[ok]
                dt = {(1, "u"): np.uint8, (1, "i"): np.int8, (2, "u"): np.uint16,
                      (2, "i"): np.int16, (4, "b"): np.uint32}[(size, typ[0])]
                try:
                    v = g.m.mem.gather(addrs, dt)
                except PageFault as e:
                    raise _fault(inst, e) from None
                vals[ok] = v.astype(np.int64).astype(u32) if dt != np.uint32 else v
        t = target(g)   # every active lane writes: out-of-range ones their 0
        if t.spans:
            ml.store_words(t, [ml.active(g, vals)] if t.compact else [vals])
    return run
