"""Cross-lane data movement of VALU sources: DPP16, DPP8 and v_permlane16/v_permlanex16.

A DPP instruction reads its first source (a VGPR) from another lane of the same wave, picked by a
fixed pattern (RDNA3 ISA section 7.7, "Data Parallel Processing", and the VOP_DPP16/VOP_DPP8
formats of chapter 15). Per destination lane the pattern gives a source lane and whether that
source is in range; then:
  * DPP16 ROW_MASK / BANK_MASK (a row is 16 lanes, a bank 4 lanes of a row) disable the lanes
    whose row or bank bit is clear: they write nothing;
  * a source lane that is out of range, or inactive (EXEC=0) while FI (fetch inactive) is 0, is
    invalid: with BOUND_CTRL=1 the lane reads 0 and writes, with BOUND_CTRL=0 it writes nothing;
  * DPP8 patterns stay inside groups of 8 lanes, so they are always in range; an inactive
    source lane reads 0 unless FI is set (the SRC0 code DPP8FI).
A lane that writes nothing keeps its destination, and for a VALU compare its bit of the lane mask
(EXEC, VCC or the SGPR it writes). v_permlane16/x16 use the same data path: their OP_SEL[0] is FI
and OP_SEL[1] BOUND_CTRL (ISA section 16, V_PERMLANE16_B32).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .decode import DPP8, DPP8FI, DPP16, Inst
from .errors import KernelFault
from .machine import WaveSet

_LANE = np.arange(32)
_IN_ROW = _LANE & 15
_ROW_BASE = _LANE & ~15


@dataclass(frozen=True)
class Pattern:
    """Where each of the 32 lanes reads from, and which lanes may write."""

    src: np.ndarray         # int [32]: source lane of each lane
    in_range: np.ndarray    # bool [32]
    enabled: np.ndarray     # bool [32]: row and bank mask
    bound_ctrl: bool        # invalid sources read 0 (and write) instead of not writing
    fi: bool                # inactive source lanes are fetched (valid)
    identity_mask: bool     # every lane enabled and in range: only EXEC can invalidate


def _dpp16_lanes(ctrl: int, inst: Inst) -> tuple[np.ndarray, np.ndarray]:
    """(source lane, in range) of a DPP_CTRL value; gfx11 has no wave shifts or row broadcasts."""
    ok = np.ones(32, dtype=bool)
    if ctrl <= 0xFF:    # quad_perm: lane i of each quad reads lane ctrl[2i+1:2i]
        sel = (ctrl >> (2 * (_LANE & 3))) & 3
        return (_LANE & ~3) | sel, ok
    n = ctrl & 15
    kind = ctrl & ~15
    if kind == 0x100 and n:   # row_shl:n, lane i reads i+n of its row
        return _ROW_BASE + ((_IN_ROW + n) & 15), _IN_ROW + n <= 15
    if kind == 0x110 and n:   # row_shr:n
        return _ROW_BASE + ((_IN_ROW - n) & 15), _IN_ROW >= n
    if kind == 0x120 and n:   # row_ror:n
        return _ROW_BASE + ((_IN_ROW - n) & 15), ok
    if ctrl == 0x140:         # row_mirror
        return _ROW_BASE + (15 - _IN_ROW), ok
    if ctrl == 0x141:         # row_half_mirror
        return _ROW_BASE + (_IN_ROW & 8) + (7 - (_IN_ROW & 7)), ok
    if kind == 0x150:         # row_share:n, every lane of a row reads its lane n
        return _ROW_BASE + n, ok
    if kind == 0x160:         # row_xmask:n, lane i reads i ^ n of its row
        return _ROW_BASE + (_IN_ROW ^ n), ok
    raise KernelFault(f"unsupported instruction: DPP_CTRL {ctrl:#x} is reserved on gfx11",
                      address=inst.addr, instruction=str(inst))


def pattern(inst: Inst) -> Pattern:
    """The lane pattern of a DPP16/DPP8 instruction (its src0 field is DPP16, DPP8 or DPP8FI)."""
    f = inst.f
    if f["src0"] == DPP16:
        src, in_range = _dpp16_lanes(f["dpp_ctrl"], inst)
        row_ok = (f["row_mask"] >> (_LANE >> 4)) & 1 == 1
        bank_ok = (f["bank_mask"] >> ((_LANE >> 2) & 3)) & 1 == 1
        enabled = row_ok & bank_ok
        bc, fi = bool(f["bound_ctrl"]), bool(f["fi"])
    else:
        src = (_LANE & ~7) | ((f["dpp8"] >> (3 * (_LANE & 7))) & 7)
        in_range = enabled = np.ones(32, dtype=bool)
        bc, fi = True, f["src0"] == DPP8FI   # an inactive source reads 0 unless FI
    return Pattern(src.astype(np.intp), in_range, enabled, bc, fi,
                   bool(in_range.all() and enabled.all()))


def permlane_pattern(inst: Inst) -> tuple[bool, bool]:
    """(FI, BOUND_CTRL) of a v_permlane16/x16: OP_SEL[0] and OP_SEL[1]."""
    opsel = inst.f.get("opsel", 0)
    return bool(opsel & 1), bool(opsel >> 1 & 1)


def gather(g: WaveSet, plane: np.ndarray, src: np.ndarray, in_range: np.ndarray, fi: bool,
           bound_ctrl: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Values of `plane` ([n, 32]) at the source lanes `src` ([32] or [n, 32]), with invalid
    sources zeroed when `bound_ctrl`; and the lanes whose source is valid (None: all are)."""
    vals = plane[:, src] if src.ndim == 1 else np.take_along_axis(plane, src, axis=1)
    valid = None
    if not in_range.all():
        valid = np.broadcast_to(in_range, vals.shape)
    if not fi and not g.exec_full:
        src_active = g.exec[:, src] if src.ndim == 1 else np.take_along_axis(g.exec, src, 1)
        valid = src_active if valid is None else valid & src_active
    if valid is not None and bound_ctrl:
        vals = np.where(valid, vals, vals.dtype.type(0))
    return vals, valid


def read_src0(inst: Inst) -> Callable[[WaveSet], np.ndarray]:
    """Reader of a DPP instruction's src0 bits (uint32 [n, 32])."""
    pat = pattern(inst)
    r = inst.f["dpp_vgpr"]
    if pat.identity_mask and pat.fi:
        src = pat.src
        return lambda g: g.v(r)[:, src]
    return lambda g: gather(g, g.v(r), pat.src, pat.in_range, pat.fi, pat.bound_ctrl)[0]


def write_mask(inst: Inst) -> Callable[[WaveSet], np.ndarray | None]:
    """The lanes (bool [n, 32]) a DPP instruction may write besides EXEC; None for all."""
    pat = pattern(inst)
    if pat.identity_mask and (pat.fi or pat.bound_ctrl):
        return lambda g: None
    enabled = pat.enabled

    def mask(g: WaveSet) -> np.ndarray | None:
        ok = np.broadcast_to(enabled, (g.n, 32))
        if not pat.bound_ctrl:
            valid = np.broadcast_to(pat.in_range, (g.n, 32))
            if not pat.fi and not g.exec_full:
                valid = valid & g.exec[:, pat.src]
            ok = ok & valid
        return None if ok.all() else ok
    return mask


def is_dpp(inst: Inst) -> bool:
    return inst.f.get("src0") in (DPP16, DPP8, DPP8FI)
