"""VALU instructions that move data between lanes or between registers by a computed index.

v_readfirstlane / v_readlane / v_writelane (a lane to or from an SGPR), v_permlane16 / x16
(gathers within or across rows of 16, on the DPP data path: dpp.py), and the M0-relative moves
v_movrels / v_movreld / v_movrelsd(_2) / v_swaprel and v_swap (RDNA3 ISA chapter 16). Lane
selects must be scalar (SGPR, M0 or a constant) and relative indices must stay inside the
kernel's VGPR allocation; anything else raises KernelFault naming the instruction.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import dpp
from .decode import M0, VGPR0, Inst
from .errors import KernelFault
from .machine import WaveSet
from .operands import Reader, reader

Exec = Callable[[WaveSet], None]
_LANE = np.arange(32, dtype=np.uint32)
u32 = np.uint32


def _unsupported(inst: Inst, why: str) -> KernelFault:
    return KernelFault(f"unsupported instruction: {why}", address=inst.addr, instruction=str(inst))


def readfirstlane(inst: Inst, sig) -> Exec:
    r0 = reader(inst.f["src0"], "b32", inst)
    dst = inst.f["vdst"]

    def run(g: WaveSet) -> None:
        v = np.broadcast_to(r0(g), (g.n, 32))
        first = np.where(g.exec.any(axis=1), np.argmax(g.exec, axis=1), 0)
        g.set_s(dst, v[np.arange(g.n), first])
    return run


def readlane(inst: Inst, sig) -> Exec:
    r0, r1 = reader(inst.f["src0"], "b32", inst), _scalar_src(inst, "src1")
    dst = inst.f["vdst"]

    def run(g: WaveSet) -> None:
        v = np.broadcast_to(r0(g), (g.n, 32))
        lane = np.broadcast_to(r1(g), (g.n, 1))[:, 0] & u32(31)
        g.set_s(dst, v[np.arange(g.n), lane])
    return run


def writelane(inst: Inst, sig) -> Exec:
    r0, r1 = _scalar_src(inst, "src0"), _scalar_src(inst, "src1")
    dst = inst.f["vdst"]

    def run(g: WaveSet) -> None:
        val = np.broadcast_to(r0(g), (g.n, 1))
        lane = np.broadcast_to(r1(g), (g.n, 1))[:, 0] & u32(31)
        sel = lane[:, None] == _LANE[None, :]
        g.set_v_lanes(dst, np.broadcast_to(val, (g.n, 32)), sel)
    return run


def _scalar_src(inst: Inst, key: str) -> Reader:
    """A lane-select operand: an SGPR, M0 or a constant (a VGPR there is illegal)."""
    code = inst.f[key]
    if code >= VGPR0:
        raise _unsupported(inst, f"{key} must be a scalar register or constant for "
                                 f"{inst.name}")
    return reader(code, "u32", inst)


def permlane(cross: bool) -> Callable[..., Exec]:
    """v_permlane16_b32 / v_permlanex16_b32: lane i of each row of 16 reads the lane of the
    same row (x16: of the other row) that nibble i of {S2, S1} names (ISA section 16)."""
    def make(inst: Inst, sig) -> Exec:
        if inst.f["src0"] < VGPR0:
            raise _unsupported(inst, "src0 of a permlane must be a VGPR")
        r = inst.f["src0"] - VGPR0
        s1, s2 = _scalar_src(inst, "src1"), _scalar_src(inst, "src2")
        fi, bc = dpp.permlane_pattern(inst)
        vdst = inst.f["vdst"]
        in_range = np.ones(32, dtype=bool)
        other_row = (_LANE.astype(np.intp) & 16) ^ (16 if cross else 0)
        nib = 4 * (_LANE.astype(np.uint64) & np.uint64(15))

        def run(g: WaveSet) -> None:
            sel64 = np.broadcast_to(s1(g), (g.n, 1)).astype(np.uint64) | \
                (np.broadcast_to(s2(g), (g.n, 1)).astype(np.uint64) << np.uint64(32))
            src = other_row + ((sel64 >> nib) & np.uint64(15)).astype(np.intp)   # [n, 32]
            vals, valid = dpp.gather(g, g.v(r), src, in_range, fi, bc)
            if valid is None or bc:
                g.set_v(vdst, vals)
            else:
                g.set_v_lanes(vdst, vals, g.exec & valid)
        return run
    return make


def _m0_field(g: WaveSet, lo: int, bits: int) -> np.ndarray:
    return ((g.s(M0) >> u32(lo)) & u32((1 << bits) - 1)).astype(np.intp)


def _rel_index(g: WaveSet, base: int, off: np.ndarray, inst: Inst) -> np.ndarray:
    idx = base + off
    if (idx >= g.m.n_vgprs).any():
        raise _unsupported(inst, f"M0-relative VGPR index {int(idx.max())} is beyond the "
                                 f"{g.m.n_vgprs} VGPRs the kernel allocates")
    return idx


def movrel(kind: str) -> Callable[..., Exec]:
    """v_movrels / v_movreld / v_movrelsd / v_movrelsd_2 / v_swaprel: VGPR moves with the source
    and/or destination index offset by M0 (per wave; _2 forms: source M0[9:0], destination
    M0[25:16])."""
    def make(inst: Inst, sig) -> Exec:
        src0 = inst.f["src0"]
        pat = dpp.pattern(inst) if dpp.is_dpp(inst) and kind != "d" else None
        if pat is not None:
            src0 = VGPR0 + inst.f["dpp_vgpr"]   # DPP moves the fetched values between lanes
        if kind != "d" and src0 < VGPR0:
            raise _unsupported(inst, "the relative source must be a VGPR")
        rd_const = reader(src0, "b32", inst) if kind == "d" else None
        s_base, d_base = src0 - VGPR0, inst.f["vdst"]
        two = kind in ("sd_2", "swap")

        def run(g: WaveSet) -> None:
            waves = g.wave_ids()
            V = g.m.V
            s_off = _m0_field(g, 0, 10) if two else _m0_field(g, 0, 32)
            d_off = _m0_field(g, 16, 10) if two else s_off
            if kind == "d":
                assert rd_const is not None
                vals = np.broadcast_to(rd_const(g), (g.n, 32))
            else:
                vals = V[_rel_index(g, s_base, s_off, inst), waves]
                if pat is not None:
                    vals = dpp.gather(g, vals, pat.src, pat.in_range, pat.fi, pat.bound_ctrl)[0]
            d_idx = _rel_index(g, d_base, d_off, inst) if kind != "s" else \
                np.full(g.n, d_base, dtype=np.intp)
            if kind == "swap":
                old = V[d_idx, waves].copy()
                s_idx = s_base + s_off
                V[s_idx, waves] = np.where(g.exec, old, V[s_idx, waves])
            V[d_idx, waves] = np.where(g.exec, vals, V[d_idx, waves])
            g.m.dirty_v.update(int(i) for i in np.unique(d_idx))
            if kind == "swap":
                g.m.dirty_v.update(int(i) for i in np.unique(s_base + s_off))
        return run
    return make


def swap(inst: Inst, sig) -> Exec:
    """v_swap_b32: exchanges vdst and src0 (a VGPR) in the active lanes."""
    if inst.f["src0"] < VGPR0:
        raise _unsupported(inst, "src0 of v_swap_b32 must be a VGPR")
    a, b = inst.f["vdst"], inst.f["src0"] - VGPR0

    def run(g: WaveSet) -> None:
        va, vb = g.v(a).copy(), g.v(b).copy()
        g.set_v(a, vb)
        g.set_v(b, va)
    return run
