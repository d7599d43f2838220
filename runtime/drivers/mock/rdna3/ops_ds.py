"""DS instructions: LDS loads, stores, two-address forms, atomics, lane permutes and swizzles.

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
from .machine import WaveSet
from .ops_gds import compile_gds
from .ops_mem import _ATOMIC_DT, _SIZES, MemOp, _transfer, atomic_exec, m0_of, mem_op

Exec = Callable[[WaveSet], None]
Offsets = Callable[[WaveSet], np.ndarray]
u32 = np.uint32
_LANE4 = (np.arange(32, dtype=u32) * u32(4))[None, :]


def lds_target(inst: Inst, addr_of: Offsets, size: int) -> Callable[[WaveSet], ml.Target]:
    """Lanes at the LDS byte addresses `addr_of` gives (uint32 [n, 32] or broadcastable)."""
    def resolve(g: WaveSet) -> ml.Target:
        m = g.m
        mask = None if g.exec_full else g.exec
        a = np.broadcast_to(addr_of(g), (g.n, 32))
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


def _vgpr_addr(addr_reg: int, off: int) -> Offsets:
    # The LDS address is the 32-bit sum of the VGPR and the offset (LLVM folds negative VGPR
    # terms into the unsigned offset, relying on the wrap).
    if not off:
        return lambda g: g.v(addr_reg)
    return lambda g: g.v(addr_reg) + u32(off)


def _ds_resolver(inst: Inst, addr_reg: int, off: int, size: int) -> Callable[[WaveSet], ml.Target]:
    return lds_target(inst, _vgpr_addr(addr_reg, off), size)


def compile_ds(inst: Inst) -> Exec:
    name, f = inst.name, inst.f
    if f["gds"]:
        return compile_gds(inst)   # GDS memory, ordered count, GS registers, GWS
    if name == "ds_nop":
        return lambda g: None
    if name in ("ds_bpermute_b32", "ds_permute_b32"):
        return _compile_permute(inst)
    if name == "ds_swizzle_b32":
        return _compile_swizzle(inst)
    if name in ("ds_append", "ds_consume"):
        return _compile_append(inst)
    if name == "ds_condxchg32_rtn_b64":
        return _compile_condxchg32(inst)
    if name == "ds_bvh_stack_rtn_b32":
        return _compile_bvh_stack(inst)
    op = mem_op(name)
    off = f["offset0"] | f["offset1"] << 8
    addr_r, vdst, d0, d1 = f["addr"], f["vdst"], f["data0"], f["data1"]
    if op.kind in ("load_addtid", "store_addtid"):
        # LDS address = M0 + offset + lane id * 4 (ISA section 11, DS_LOAD/STORE_ADDTID_B32).
        def addtid(g: WaveSet) -> np.ndarray:
            return m0_of(g)[:, None] + u32(off) + _LANE4
        return _transfer(inst, op.kind.removesuffix("_addtid"), "b32", vdst, d0,
                         lds_target(inst, addtid, 4))
    if op.kind in ("load", "store") and op.typ in _SIZES:
        return _transfer(inst, op.kind, op.typ, vdst, d0,
                         _ds_resolver(inst, addr_r, off, _SIZES[op.typ]), op.d16)
    if op.kind.startswith("load_2addr") or op.kind.startswith("store_2addr"):
        return _compile_2addr(inst, op)
    if op.kind.startswith("storexchg_2addr"):
        return _compile_xchg_2addr(inst, op)
    return _compile_ds_atomic(inst, op, off)


def _compile_2addr(inst: Inst, op: MemOp) -> Exec:
    f = inst.f
    addr_r, vdst, d0, d1 = f["addr"], f["vdst"], f["data0"], f["data1"]
    size = _SIZES[op.typ]
    scale = size * (64 if "stride64" in op.kind else 1)
    o0, o1 = f["offset0"] * scale, f["offset1"] * scale
    ndw = size // 4
    plain = op.kind.split("_")[0]
    first = _transfer(inst, plain, op.typ, vdst, d0, _ds_resolver(inst, addr_r, o0, size))
    second = _transfer(inst, plain, op.typ, vdst + ndw, d1, _ds_resolver(inst, addr_r, o1, size))
    if plain == "load" and vdst <= addr_r < vdst + ndw:
        first, second = second, first  # the first result overwrites the address register

    def both(g: WaveSet) -> None:
        first(g)
        second(g)
    return both


def _compile_xchg_2addr(inst: Inst, op: MemOp) -> Exec:
    """DS_STOREXCHG_2ADDR[_STRIDE64]_RTN: two exchanges, the old values to vdst and vdst+ndw
    (both addresses come from the address VGPR as it was before either returns)."""
    f = inst.f
    dt = _ATOMIC_DT[op.typ]
    ndw = np.dtype(dt).itemsize // 4
    scale = ndw * 4 * (64 if "stride64" in op.kind else 1)
    saved: list[np.ndarray] = []

    def at(o: int) -> Offsets:
        return lambda g: saved[-1] + u32(o * scale)
    parts = [atomic_exec(inst, "swap", dt, ndw, f["vdst"] + k * ndw, d, None, True,
                         lds_target(inst, at(o), ndw * 4))
             for k, (o, d) in enumerate(((f["offset0"], f["data0"]), (f["offset1"], f["data1"])))]

    def run(g: WaveSet) -> None:
        saved.append(g.v(f["addr"]).copy())
        try:
            parts[0](g)
            parts[1](g)
        finally:
            saved.pop()
    return run


def _compile_ds_atomic(inst: Inst, op: MemOp, off: int) -> Exec:
    kind = op.kind
    want = kind.endswith("_rtn")
    name = kind.removesuffix("_rtn")
    f = inst.f
    # ds_cmpstore: data0 is the new value, data1 the compare value; ds_mskor: data0 the mask
    # to clear, data1 the bits to set; ds_wrap: data0 the limit, data1 the increment.
    second = f["data1"] if name in ("cmpstore", "mskor", "wrap") else None
    return compile_lds_atomic(inst, name, op.typ, want, _vgpr_addr(f["addr"], off), f["vdst"],
                              f["data0"], second)


def compile_lds_atomic(inst: Inst, op: str, typ: str, want: bool, addr_of: Offsets, vdst: int,
                       vsrc: int, vsecond: int | None) -> Exec:
    """An LDS read-modify-write (DS atomics and FLAT atomics on the shared aperture)."""
    dt = _ATOMIC_DT.get(typ)
    if op == "cmpswap":  # FLAT cmpswap: data = (new, compare)
        op = "cmpstore"
    if dt is None or op not in atomics.OPS:
        raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))
    ndw = np.dtype(dt).itemsize // 4
    resolve = lds_target(inst, addr_of, np.dtype(dt).itemsize)
    return atomic_exec(inst, op, dt, ndw, vdst, vsrc, vsecond, want, resolve)


def _compile_permute(inst: Inst) -> Exec:
    f = inst.f
    back = inst.name == "ds_bpermute_b32"
    off = f["offset0"] | f["offset1"] << 8

    def run(g: WaveSet) -> None:
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


def swizzle_lanes(offset: int) -> np.ndarray | None:
    """The source lane of each of 32 lanes for a ds_swizzle_b32 offset, None for the modes gfx11
    does not have. RDNA3 ISA section 11 (DS_SWIZZLE_B32): offset[15] set is quad-permute mode
    (lane i of each quad reads lane offset[2i+1:2i] of its quad); clear is bit-mask mode over
    the 32 lanes: source = ((lane & and_mask) | or_mask) ^ xor_mask with the masks in offset
    bits [4:0], [9:5] and [14:10]."""
    lane = np.arange(32)
    if offset & 0x8000:
        if offset & 0x7F00:
            return None  # FFT / rotate encodings (not gfx11 modes)
        sel = (offset >> (2 * (lane & 3))) & 3
        return (lane & ~3) | sel
    and_m, or_m, xor_m = offset & 0x1F, offset >> 5 & 0x1F, offset >> 10 & 0x1F
    return ((lane & and_m) | or_m) ^ xor_m


def _compile_swizzle(inst: Inst) -> Exec:
    f = inst.f
    off = f["offset0"] | f["offset1"] << 8
    src = swizzle_lanes(off)
    if src is None:
        raise KernelFault(f"ds_swizzle_b32 offset {off:#06x} selects an FFT/rotate mode, which "
                          "gfx11 does not have", address=inst.addr, instruction=str(inst))
    # The data comes through the ADDR field (LLVM's DS_SWIZZLE_B32 takes it as vaddr).
    vdst, src_r = f["vdst"], f["addr"]

    def run(g: WaveSet) -> None:
        # A lane that reads an inactive lane gets 0 (the data goes through the LDS crossbar,
        # which only inactive lanes' zeros reach).
        data = np.where(g.exec, g.v(src_r), u32(0))
        g.set_v(vdst, data[:, src])
    return run


def _compile_append(inst: Inst) -> Exec:
    """DS_APPEND / DS_CONSUME: add (subtract) the number of active lanes of the wave to the LDS
    dword at M0[15:0] + offset and return the value before to every active lane (ISA section
    11). A wave64 counts the active lanes of both its rows and bumps the counter once."""
    f = inst.f
    off = f["offset0"] | f["offset1"] << 8
    sign = 1 if inst.name == "ds_append" else -1
    vdst = f["vdst"]

    def run(g: WaveSet) -> None:
        m = g.m
        rows = 2 if m.wave64 else 1
        counts = np.count_nonzero(g.exec, axis=1).reshape(-1, rows).sum(axis=1)
        addr = ((m0_of(g) & u32(0xFFFF)) + u32(off))[::rows]   # the SGPRs are the wave's
        lds_base = m.wave_lds_base[g.idx][::rows]
        olds = np.zeros(len(counts), dtype=u32)
        for w in np.nonzero(counts)[0]:   # wave order: each wave's add sees the earlier ones
            a = int(addr[w])
            if a % 4 or a + 4 > m.lds_bytes:
                raise PageFaultError(f"{inst.name} counter at LDS offset {a:#x} is misaligned or "
                                     f"beyond the {m.lds_bytes} B allocated",
                                     address=inst.addr, instruction=str(inst))
            i = (int(lds_base[w]) + a) // 4
            olds[w] = m.lds32[i]
            m.lds32[i] = u32((int(olds[w]) + sign * int(counts[w])) & 0xFFFFFFFF)
        g.set_v(vdst, np.broadcast_to(np.repeat(olds, rows)[:, None], (g.n, 32)))
    return run


def _lds_dword(inst: Inst, g: WaveSet, w: int, a: int) -> int:
    """Index into the batch's LDS dwords of byte offset `a` of wave w's allocation."""
    m = g.m
    if a % 4 or a + 4 > m.lds_bytes:
        raise PageFaultError(f"{inst.name} LDS dword at offset {a:#x} is misaligned or beyond "
                             f"the {m.lds_bytes} B allocated", address=inst.addr,
                             instruction=str(inst))
    return (int(m.wave_lds_base[g.idx][w]) + a) // 4


def _active_lanes(g: WaveSet) -> list[tuple[int, int]]:
    """(wave row, lane) of every active lane, in wave then lane order."""
    return [(int(w), int(ln)) for w, ln in zip(*np.nonzero(g.exec))]


def _compile_condxchg32(inst: Inst) -> Exec:
    """DS_CONDXCHG32_RTN_B64 (ISA section 16.15): two dwords at ADDR0 = (ADDR + offset) & 0xfff8
    and ADDR0 + 4; each returns its old value and takes the matching half of DATA, bit 31 of
    that half cleared, when the half's bit 31 is set. Lanes act one after another."""
    f = inst.f
    off = f["offset0"] | f["offset1"] << 8
    vdst, addr_r, d0 = f["vdst"], f["addr"], f["data0"]

    def run(g: WaveSet) -> None:
        lds = g.m.lds32
        a = g.v(addr_r)
        data = [g.v(d0), g.v(d0 + 1)]
        old = [np.zeros((g.n, 32), dtype=u32), np.zeros((g.n, 32), dtype=u32)]
        for w, ln in _active_lanes(g):
            a0 = (int(a[w, ln]) + off) & 0xFFF8
            for k in range(2):
                i = _lds_dword(inst, g, w, a0 + 4 * k)
                old[k][w, ln] = lds[i]
                d = int(data[k][w, ln])
                if d >> 31:
                    lds[i] = d & 0x7FFFFFFF
        g.set_v(vdst, old[0])
        g.set_v(vdst + 1, old[1])
    return run


BVH_INVALID_NODE = 0xFFFFFFFF
BVH_ENTRY_STRIDE_B = 128


def _compile_bvh_stack(inst: Inst) -> Exec:
    """DS_BVH_STACK_RTN_B32 vdst, addr, data0, data1[4] (ISA sections 12.5.3 and 16.15): a
    per-lane short stack in LDS for BVH traversal.

    ADDR packs the lane's stack: bits [31:18] its base in dwords, the low bits its index (Mesa's
    radv_build_bvh_stack_rtn_addr: bits 0-17, starting at 0); OFFSET1[5:4] gives the stack size,
    8 << OFFSET1[5:4] entries. Entry k lies at base + k * 128 bytes (Mesa: "the hardware uses a
    stride of 128 bytes (32 entries)", the stacks of 32 lanes interleaved), and the index wraps
    at the stack size, overwriting the oldest entries. DATA0 is the last visited node; DATA1[0:2]
    are pushed when valid (not INVALID_NODE 0xffffffff, nor equal to a valid last node, which
    also ends the pushing); DATA1[3] is returned when valid, else the stack is popped (the entry
    read and replaced by INVALID_NODE). Pop takes the entry below the index, the last one pushed
    (the pseudocode reads at the index before decrementing it, which would not return what was
    pushed). VDST gets the node, ADDR the new stack address (base and index)."""
    f = inst.f
    size = 8 << ((f["offset1"] >> 4) & 3)
    vdst, addr_r, d0, d1 = f["vdst"], f["addr"], f["data0"], f["data1"]

    def valid(x: int, last: int) -> bool:
        return x != BVH_INVALID_NODE and not (last != BVH_INVALID_NODE and x == last)

    def run(g: WaveSet) -> None:
        lds = g.m.lds32
        a = g.v(addr_r).copy()
        last_of = g.v(d0)
        data = [g.v(d1 + k) for k in range(4)]
        ret = np.zeros((g.n, 32), dtype=u32)
        for w, ln in _active_lanes(g):
            addr, last = int(a[w, ln]), int(last_of[w, ln])
            base, idx = (addr >> 18) << 2, (addr & 0x3FFFF) % size

            def slot(k: int) -> int:
                return _lds_dword(inst, g, w, base + k * BVH_ENTRY_STRIDE_B)
            for k in range(3):
                x = int(data[k][w, ln])
                if valid(x, last):
                    lds[slot(idx)] = x
                    idx = (idx + 1) % size
                elif x == last:
                    break   # the rest was visited already
            x = int(data[3][w, ln])
            if valid(x, last):
                ret[w, ln] = x
            else:
                idx = (idx - 1) % size
                ret[w, ln] = lds[slot(idx)]
                lds[slot(idx)] = BVH_INVALID_NODE
            a[w, ln] = (addr & 0xFFFC0000) | idx
        g.set_v(addr_r, a)
        g.set_v(vdst, ret)
    return run
