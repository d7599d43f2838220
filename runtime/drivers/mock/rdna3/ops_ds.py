"""DS instructions: LDS loads, stores, two-address forms, atomics, lane permutes.

LDS is one byte array for the whole batch, each workgroup owning `lds_bytes` of it; a lane's
address is its 32-bit DS address (VGPR + offset, wrapping) plus its workgroup's base. Accesses
beyond the dispatch's LDS allocation fault (the hardware would drop them), which catches a
runtime that left RSRC2.LDS_SIZE at the compiler's 0.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import atomics
from . import mem_lanes as ml
from .decode import Inst
from .errors import KernelFault, PageFaultError
from .machine import Group
from .ops_mem import _ATOMIC_DT, _SIZES, _atomic_exec, _kind, _transfer

Exec = Callable[[Group], None]
u32 = np.uint32


def _ds_resolver(inst: Inst, addr_reg: int, off: int, size: int) -> Callable[[Group], ml.Target]:
    def resolve(g: Group) -> ml.Target:
        m = g.m
        mask = None if g.exec_full else g.exec
        # The LDS address is the 32-bit sum of the VGPR and the offset (LLVM folds negative VGPR
        # terms into the unsigned offset, relying on the wrap).
        a = g.v(addr_reg)
        if off:
            a = a + u32(off)
        amax = int(a.max())
        if amax + size > m.lds_bytes:
            b = ml.lane_bounds(a, mask) if mask is not None else (0, amax)
            if b is None:
                return ml.Target([], False)
            if b[1] + size > m.lds_bytes:
                raise PageFaultError(
                    f"LDS access of {size} B at offset {b[1]:#x} is beyond the {m.lds_bytes} B "
                    "this dispatch allocated (RSRC2.LDS_SIZE; the compiler leaves it to the "
                    "runtime)", address=inst.addr, instruction=str(inst))
        full = a + m.wave_lds_base[g.idx][:, None]  # uint32: a batch's LDS is far below 4 GiB
        lo, hi = ml.all_bounds(full)
        span = ml.Span(m.lds, full, lo, hi, mask=mask, all_lanes=True)
        return ml.Target([span], False)
    return resolve


def compile_ds(inst: Inst) -> Exec:
    name, f = inst.name, inst.f
    if f["gds"]:
        raise KernelFault("GDS is not supported", address=inst.addr, instruction=str(inst))
    if name == "ds_nop":
        return lambda g: None
    if name in ("ds_bpermute_b32", "ds_permute_b32"):
        return _compile_permute(inst)
    kind, typ = _kind(name)
    off = f["offset0"] | f["offset1"] << 8
    addr_r, vdst, d0, d1 = f["addr"], f["vdst"], f["data0"], f["data1"]
    if kind in ("load", "store") and typ in _SIZES:
        return _transfer(inst, kind, typ, vdst, d0, _ds_resolver(inst, addr_r, off, _SIZES[typ]))
    if kind.startswith("load_2addr") or kind.startswith("store_2addr"):
        size = _SIZES[typ]
        scale = size * (64 if "stride64" in kind else 1)
        o0, o1 = f["offset0"] * scale, f["offset1"] * scale
        ndw = size // 4
        plain = kind.split("_")[0]
        first = _transfer(inst, plain, typ, vdst, d0, _ds_resolver(inst, addr_r, o0, size))
        second = _transfer(inst, plain, typ, vdst + ndw, d1, _ds_resolver(inst, addr_r, o1, size))
        if plain == "load" and vdst <= addr_r < vdst + ndw:
            first, second = second, first  # the first result overwrites the address register

        def both(g: Group) -> None:
            first(g)
            second(g)
        return both
    return _compile_ds_atomic(inst, kind, typ, off)


def _compile_ds_atomic(inst: Inst, kind: str, typ: str, off: int) -> Exec:
    want = kind.endswith("_rtn")
    op = kind.removesuffix("_rtn")
    dt = _ATOMIC_DT.get(typ)
    if dt is None or op not in atomics.OPS:
        raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))
    f = inst.f
    ndw = np.dtype(dt).itemsize // 4
    # ds_cmpstore: data0 is the new value, data1 the compare value
    vcmp = f["data1"] if op == "cmpstore" else None
    resolve = _ds_resolver(inst, f["addr"], off, np.dtype(dt).itemsize)
    return _atomic_exec(inst, op, dt, ndw, f["vdst"], f["data0"], vcmp, want, resolve)


def _compile_permute(inst: Inst) -> Exec:
    f = inst.f
    back = inst.name == "ds_bpermute_b32"
    off = f["offset0"] | f["offset1"] << 8

    def run(g: Group) -> None:
        lane = ((g.v(f["addr"]) + u32(off)) >> u32(2)) & u32(31)
        data = np.where(g.exec, g.v(f["data0"]), u32(0))
        rows = np.arange(g.n)[:, None]
        if back:
            # bpermute: each lane reads data from the lane it names (0 from inactive lanes).
            g.set_v(f["vdst"], data[rows, lane])
        else:
            # permute: each active lane writes its data to the lane it names.
            out = np.zeros((g.n, 32), dtype=u32)
            rr, ll = np.broadcast_to(rows, (g.n, 32))[g.exec], lane[g.exec]
            out[rr, ll] = data[g.exec]
            g.set_v(f["vdst"], out)
    return run


