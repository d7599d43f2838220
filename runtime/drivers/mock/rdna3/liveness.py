"""Which lane-mask results are never read (a small dead-store analysis, per basic block).

VALU carries (v_add_co_u32, v_add_co_ci_u32 ...) and compares write a lane mask to VCC or an
SGPR. Address arithmetic produces a chain of them where each carry is overwritten by the next
instruction's before anything reads it; computing those masks is pure waste for a vectorised
interpreter. A write is dead when, scanning forward in straight-line code, the same SGPR is fully
rewritten before any instruction might read it, or the program ends first. Anything the scan
does not understand (branches, barriers, unknown reads) counts as a read, so the analysis only
ever errs towards computing a mask.
"""
from __future__ import annotations

from .decode import NULL, VCC_LO, Inst

_IMPLICIT_VCC_READERS = {"v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32",
                         "v_cndmask_b32", "v_div_fmas_f32", "v_div_fmas_f64",
                         "s_cbranch_vccz", "s_cbranch_vccnz", "v_dual_cndmask_b32"}
_END = {"s_endpgm", "s_endpgm_saved"}
_PURE_NOPS = {"s_nop", "s_waitcnt", "s_delay_alu", "s_clause", "s_waitcnt_depctr",
              "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt", "s_waitcnt_expcnt",
              "s_sendmsg", "s_set_inst_prefetch_distance", "buffer_gl0_inv", "buffer_gl1_inv"}
_SRC_KEYS = ("src0", "src1", "src2", "ssrc0", "ssrc1", "srcx0", "srcy0", "soffset", "saddr",
             "sbase", "srsrc")


def mask_write(inst: Inst) -> int | None:
    """The SGPR a VALU instruction writes a whole lane mask to, or None."""
    name, enc = inst.name, inst.enc
    if enc == "VOPC":
        return None if name.startswith("v_cmpx") else VCC_LO
    if enc == "VOP3" and name.startswith("v_cmp") and not name.startswith("v_cmpx"):
        return inst.f["vdst"]
    if enc == "VOP3SD":
        return inst.f["sdst"]
    if enc == "VOP2" and name in ("v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32"):
        return VCC_LO
    return None


def _may_read(inst: Inst, r: int) -> bool:
    if inst.name in _PURE_NOPS:
        return False
    if inst.name.startswith("s_movrel"):
        return True   # M0-relative: any SGPR may be read (and written: not a full rewrite)
    if r == VCC_LO and (inst.name in _IMPLICIT_VCC_READERS or inst.name_y in
                        _IMPLICIT_VCC_READERS):
        return True
    if inst.enc in ("SOPP",):
        return inst.name not in _END  # branches and the rest: be conservative
    if inst.name.startswith("<"):
        return True
    for key in _SRC_KEYS:
        v = inst.f.get(key)
        if v is None:
            continue
        span = 4 if key in ("sbase", "srsrc") else 2
        if v <= r < v + span or v == 251 and r == VCC_LO:
            return True
    return False


def dead_mask_writes(insts: list[Inst]) -> set[int]:
    """Indices of instructions whose lane-mask result is overwritten before it can be read."""
    dead: set[int] = set()
    for i, inst in enumerate(insts):
        r = mask_write(inst)
        if r is None or r == NULL:
            continue
        for nxt in insts[i + 1:]:
            if nxt.name in _END:
                dead.add(i)
                break
            if _may_read(nxt, r):
                break
            if nxt.enc == "SOPP" or nxt.name in ("s_call_b64", "s_setpc_b64", "s_swappc_b64"):
                break
            if mask_write(nxt) == r:
                dead.add(i)
                break
            # SALU writes to r kill it too (the mask itself was then unused).
            if nxt.enc in ("SOP1", "SOP2", "SOPK") and nxt.f.get("sdst") == r:
                dead.add(i)
                break
    return dead


_SAFE_SCALAR = {"s_waitcnt", "s_delay_alu", "s_nop", "s_clause", "s_waitcnt_depctr",
                "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt", "s_waitcnt_expcnt",
                "buffer_gl0_inv", "buffer_gl1_inv"}
_UNSAFE_VALU = {"v_readfirstlane_b32", "v_readlane_b32", "v_writelane_b32"}


def exec_masked_only(inst: Inst) -> bool:
    """True if the instruction has no effect at all in a wave whose EXEC is zero."""
    if inst.name in _SAFE_SCALAR:
        return True
    if inst.enc in ("DS", "FLAT", "MUBUF", "MTBUF"):
        return inst.name not in ("ds_append", "ds_consume") and not inst.f.get("gds")
    if inst.enc in ("VOP1", "VOP2", "VOP3", "VOPD", "VOP3P"):
        return inst.name not in _UNSAFE_VALU and mask_write(inst) is None and \
            not inst.name.startswith("v_cmp")
    if inst.enc == "VOP3SD":
        return inst.f["sdst"] == NULL
    return False


def masked_block(insts: list[Inst], first: int, end: int) -> bool:
    """Whether instructions [first, end) are all EXEC-masked-only (a block a branch on EXECZ may
    skip, or let empty-EXEC waves run through)."""
    return end > first and all(exec_masked_only(i) for i in insts[first:end])
