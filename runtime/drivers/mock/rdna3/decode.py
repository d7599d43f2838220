"""Binary decoder for gfx1100 (RDNA3) machine code.

Turns code bytes into `Inst` records: encoding, opcode, mnemonic (from `opcodes.TABLES`), the raw
operand fields and the 32-bit literal if one follows. Field layouts are those of the RDNA3 ISA
reference ("RDNA3 Shader Instruction Set Architecture", chapter 15, microcode formats); the tests
check every instruction of every test kernel against `llvm-objdump-16 -d --mcpu=gfx1100`.

Instructions whose encoding or opcode is unknown still decode (as `enc="UNKNOWN"` or with a
`name` of "<ENC op N>") so that data after the code does not stop decoding; executing one raises.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .opcodes import TABLES

# Scalar operand codes (9-bit source fields use 256+ for VGPRs), RDNA3 ISA section 3.
VCC_LO, VCC_HI, NULL, M0, EXEC_LO, EXEC_HI = 106, 107, 124, 125, 126, 127
LITERAL, DPP16, DPP8, DPP8FI = 255, 250, 233, 234
SRC_SCC, SRC_EXECZ, SRC_VCCZ = 253, 252, 251
VGPR0 = 256

# Mnemonics that carry a 32-bit literal even when no source field says 255.
IMPLICIT_LITERAL = {"v_fmamk_f32", "v_fmaak_f32", "v_fmamk_f16", "v_fmaak_f16",
                    "v_dual_fmamk_f32", "v_dual_fmaak_f32", "s_setreg_imm32_b32"}
# VOP3 opcodes that use the VOP3SD layout (an SGPR carry/condition destination in [14:8]).
VOP3SD_NAMES = {"v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32", "v_div_scale_f32",
                "v_div_scale_f64", "v_mad_u64_u32", "v_mad_i64_i32", "v_add_co_u32",
                "v_sub_co_u32", "v_subrev_co_u32"}


@dataclass(frozen=True, slots=True)
class Inst:
    """One decoded instruction. `f` holds the operand fields named as in the ISA manual."""

    addr: int
    size: int
    enc: str
    op: int
    name: str
    f: dict[str, int] = field(default_factory=dict)
    literal: int | None = None
    name_y: str = ""       # VOPD: the Y half's mnemonic (`name` is the X half)
    words: tuple[int, ...] = ()

    def __str__(self) -> str:
        from .disasm import render  # local import: the renderer is only for messages and tests
        return render(self)



def _buffer_dword1(w1: int) -> dict[str, int]:
    """The second dword MUBUF and MTBUF share on gfx11: addresses, V#, flags, SOFFSET."""
    return {"vaddr": _bits(w1, 7, 0), "vdata": _bits(w1, 15, 8),
            "srsrc": _bits(w1, 20, 16) * 4, "tfe": _bits(w1, 21, 21),
            "offen": _bits(w1, 22, 22), "idxen": _bits(w1, 23, 23),
            "soffset": _bits(w1, 31, 24)}

def _bits(w: int, hi: int, lo: int) -> int:
    return (w >> lo) & ((1 << (hi - lo + 1)) - 1)


def _sext(v: int, nbits: int) -> int:
    return v - (1 << nbits) if v & (1 << (nbits - 1)) else v


def _encoding(w: int) -> str:
    """Encoding name from the first dword's fixed prefix bits."""
    if w >> 31 == 0:
        if w >> 25 == 0b0111111:
            return "VOP1"
        if w >> 25 == 0b0111110:
            return "VOPC"
        return "VOP2"
    if w >> 30 == 0b10:
        top9 = w >> 23
        if top9 == 0x17D:
            return "SOP1"
        if top9 == 0x17E:
            return "SOPC"
        if top9 == 0x17F:
            return "SOPP"
        if w >> 28 == 0b1011:
            return "SOPK"
        return "SOP2"
    top6, top8 = w >> 26, w >> 24
    if top8 == 0xCC:
        return "VOP3P"
    if top8 == 0xCD:
        return "VINTERP"
    if top8 == 0xCE:
        return "LDSDIR"
    return {0b110010: "VOPD", 0b110101: "VOP3", 0b111101: "SMEM", 0b110110: "DS",
            0b110111: "FLAT", 0b111000: "MUBUF", 0b111010: "MTBUF", 0b111100: "MIMG",
            0b111110: "EXP"}.get(top6, "UNKNOWN")


_BASE_DWORDS = {"SOP1": 1, "SOP2": 1, "SOPC": 1, "SOPK": 1, "SOPP": 1, "VOP1": 1, "VOP2": 1,
                "VOPC": 1, "VOP3": 2, "VOP3P": 2, "VOPD": 2, "SMEM": 2, "DS": 2, "FLAT": 2,
                "MUBUF": 2, "MTBUF": 2, "MIMG": 2, "EXP": 2, "VINTERP": 2, "LDSDIR": 1,
                "UNKNOWN": 1}


def _fields(enc: str, w0: int, w1: int) -> tuple[int, dict[str, int]]:
    """(opcode, operand fields) of one instruction; w1 is 0 for one-dword encodings."""
    if enc == "SOP2":
        return _bits(w0, 29, 23), {"sdst": _bits(w0, 22, 16), "ssrc0": _bits(w0, 7, 0),
                                   "ssrc1": _bits(w0, 15, 8)}
    if enc == "SOPK":
        return _bits(w0, 27, 23), {"sdst": _bits(w0, 22, 16), "simm16": _bits(w0, 15, 0)}
    if enc == "SOP1":
        return _bits(w0, 15, 8), {"sdst": _bits(w0, 22, 16), "ssrc0": _bits(w0, 7, 0)}
    if enc == "SOPC":
        return _bits(w0, 22, 16), {"ssrc0": _bits(w0, 7, 0), "ssrc1": _bits(w0, 15, 8)}
    if enc == "SOPP":
        return _bits(w0, 22, 16), {"simm16": _bits(w0, 15, 0)}
    if enc == "SMEM":
        return _bits(w0, 25, 18), {"sbase": _bits(w0, 5, 0) * 2, "sdata": _bits(w0, 12, 6),
                                   "dlc": _bits(w0, 13, 13), "glc": _bits(w0, 14, 14),
                                   "offset": _sext(_bits(w1, 20, 0), 21),
                                   "soffset": _bits(w1, 31, 25)}
    if enc == "VOP1":
        return _bits(w0, 16, 9), {"vdst": _bits(w0, 24, 17), "src0": _bits(w0, 8, 0)}
    if enc == "VOP2":
        return _bits(w0, 30, 25), {"vdst": _bits(w0, 24, 17), "src0": _bits(w0, 8, 0),
                                   "src1": VGPR0 + _bits(w0, 16, 9)}
    if enc == "VOPC":
        return _bits(w0, 24, 17), {"src0": _bits(w0, 8, 0), "src1": VGPR0 + _bits(w0, 16, 9)}
    if enc == "VOP3":
        return _bits(w0, 25, 16), {
            "vdst": _bits(w0, 7, 0), "abs": _bits(w0, 10, 8), "opsel": _bits(w0, 14, 11),
            "sdst": _bits(w0, 14, 8), "clamp": _bits(w0, 15, 15), "src0": _bits(w1, 8, 0),
            "src1": _bits(w1, 17, 9), "src2": _bits(w1, 26, 18), "omod": _bits(w1, 28, 27),
            "neg": _bits(w1, 31, 29)}
    if enc == "VOP3P":
        return _bits(w0, 22, 16), {
            "vdst": _bits(w0, 7, 0), "neg_hi": _bits(w0, 10, 8), "opsel": _bits(w0, 13, 11),
            "opsel_hi": _bits(w1, 28, 27) | _bits(w0, 14, 14) << 2, "clamp": _bits(w0, 15, 15),
            "src0": _bits(w1, 8, 0), "src1": _bits(w1, 17, 9), "src2": _bits(w1, 26, 18),
            "neg": _bits(w1, 31, 29)}
    if enc == "VOPD":
        vdstx = _bits(w1, 31, 24)
        return _bits(w0, 25, 22), {
            "opy": _bits(w0, 21, 17), "srcx0": _bits(w0, 8, 0),
            "vsrcx1": VGPR0 + _bits(w0, 16, 9), "vdstx": vdstx, "srcy0": _bits(w1, 8, 0),
            "vsrcy1": VGPR0 + _bits(w1, 16, 9),
            # vdstY's lowest bit is implied: the opposite of vdstX's (the two land in
            # different VGPR banks); ISA section 7.6 (VOPD).
            "vdsty": _bits(w1, 23, 17) << 1 | (~vdstx & 1)}
    if enc == "DS":
        return _bits(w0, 25, 18), {
            "offset0": _bits(w0, 7, 0), "offset1": _bits(w0, 15, 8), "gds": _bits(w0, 17, 17),
            "addr": _bits(w1, 7, 0), "data0": _bits(w1, 15, 8), "data1": _bits(w1, 23, 16),
            "vdst": _bits(w1, 31, 24)}
    if enc == "FLAT":
        return _bits(w0, 24, 18), {
            "offset": _sext(_bits(w0, 12, 0), 13), "dlc": _bits(w0, 13, 13),
            "glc": _bits(w0, 14, 14), "slc": _bits(w0, 15, 15), "seg": _bits(w0, 17, 16),
            "addr": _bits(w1, 7, 0), "data": _bits(w1, 15, 8), "saddr": _bits(w1, 22, 16),
            "sve": _bits(w1, 23, 23), "vdst": _bits(w1, 31, 24)}
    if enc == "MUBUF":
        # gfx11 moved OFFEN/IDXEN into the second dword (LLVM's MUBUF_Real_gfx11).
        return _bits(w0, 25, 18), {
            "offset": _bits(w0, 11, 0), "slc": _bits(w0, 12, 12), "dlc": _bits(w0, 13, 13),
            "glc": _bits(w0, 14, 14), "lds": _bits(w0, 16, 16), **_buffer_dword1(w1)}
    if enc == "MTBUF":
        # gfx11: a 4-bit opcode and the 7-bit data format in the first dword, the rest as in
        # MUBUF (LLVM's MTBUF_Real_gfx11).
        return _bits(w0, 18, 15), {
            "offset": _bits(w0, 11, 0), "slc": _bits(w0, 12, 12), "dlc": _bits(w0, 13, 13),
            "glc": _bits(w0, 14, 14), "format": _bits(w0, 25, 19), **_buffer_dword1(w1)}
    return 0, {}


def _dpp_fields(enc: str, src0: int, w: int, f: dict[str, int]) -> None:
    """The DPP16 / DPP8 dword that follows the instruction (ISA section 15.3, "VOP_DPP16",
    "VOP_DPP8"): the source VGPR, the lane pattern and, for DPP16, the masks and the source
    modifiers (which VOP1/VOP2/VOPC keep there; VOP3 has its own)."""
    f["dpp_vgpr"] = _bits(w, 7, 0)
    if src0 == DPP16:
        f.update(dpp_ctrl=_bits(w, 16, 8), fi=_bits(w, 18, 18), bound_ctrl=_bits(w, 19, 19),
                 bank_mask=_bits(w, 27, 24), row_mask=_bits(w, 31, 28))
        if enc in ("VOP1", "VOP2", "VOPC"):
            # src0_neg [20], src0_abs [21], src1_neg [22], src1_abs [23], in VOP3's layout.
            f["neg"] = _bits(w, 20, 20) | _bits(w, 22, 22) << 1
            f["abs"] = _bits(w, 21, 21) | _bits(w, 23, 23) << 1
    else:
        f.update(dpp8=_bits(w, 31, 8), fi=int(src0 == DPP8FI))


def _table_name(enc: str, op: int, f: dict[str, int]) -> str:
    if enc == "FLAT":
        seg = {0: "FLAT", 1: "SCRATCH", 2: "GLOBAL"}.get(f["seg"], "")
        name = TABLES.get(seg, {}).get(op)
        return name or f"<{seg or 'FLAT seg 3'} op {op}>"
    name = TABLES.get(enc, {}).get(op)
    return name or f"<{enc} op {op}>"


def _literal_fields(enc: str, name: str, f: dict[str, int]) -> bool:
    """Whether a 32-bit literal dword follows the instruction's base dwords."""
    if name in IMPLICIT_LITERAL:
        return True
    if enc in ("SOP1", "SOP2", "SOPC"):
        return LITERAL in (f.get("ssrc0"), f.get("ssrc1"))
    if enc in ("VOP1", "VOP2", "VOPC"):
        return f["src0"] == LITERAL
    if enc in ("VOP3", "VOP3SD", "VOP3P"):
        return LITERAL in (f["src0"], f["src1"], f["src2"])
    if enc == "VOPD":
        return LITERAL in (f["srcx0"], f["srcy0"])
    return False


def decode_one(code: bytes | memoryview, pos: int, addr: int) -> Inst:
    """Decodes the instruction at byte `pos` of `code`; `addr` is its virtual address."""
    end = len(code)
    if pos + 4 > end:
        return Inst(addr, 4, "UNKNOWN", 0, "<truncated>")
    w0 = int.from_bytes(code[pos:pos + 4], "little")
    enc = _encoding(w0)
    ndw = _BASE_DWORDS[enc]
    if enc == "MIMG":
        ndw += (_bits(w0, 2, 1) + 3) // 4 if w0 & 1 else 0  # NSA: extra address dwords
    w1 = int.from_bytes(code[pos + 4:pos + 8], "little") if ndw > 1 and pos + 8 <= end else 0
    op, f = _fields(enc, w0, w1)
    if enc == "VOP3" and TABLES["VOP3"].get(op) not in VOP3SD_NAMES:
        f.pop("sdst")
    elif enc == "VOP3":
        enc = "VOP3SD"
        for k in ("abs", "opsel"):
            f.pop(k)
    if enc == "VOP3SD":
        name = TABLES["VOP3"][op]
    else:
        name = _table_name(enc, op, f)
    name_y = ""
    if enc == "VOPD":
        name = TABLES["VOPD_X"].get(op, f"<VOPD opX {op}>")
        name_y = TABLES["VOPD_Y"].get(f["opy"], f"<VOPD opY {f['opy']}>")
    size = 4 * ndw
    src0 = f.get("src0")
    if enc in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P") and \
            src0 in (DPP16, DPP8, DPP8FI):
        pd = pos + size
        _dpp_fields(enc, src0, int.from_bytes(code[pd:pd + 4], "little") if pd + 4 <= end
                    else 0, f)
        size += 4
    literal = None
    if _literal_fields(enc, name, f) or (name_y and name_y in IMPLICIT_LITERAL):
        if pos + size + 4 <= end:
            literal = int.from_bytes(code[pos + size:pos + size + 4], "little")
        size += 4
    words = tuple(int.from_bytes(code[p:p + 4], "little")
                  for p in range(pos, min(pos + size, end), 4))
    return Inst(addr, size, enc, op, name, f, literal, name_y, words)


def decode_all(code: bytes, base: int, stop_at_code_end: bool = True) -> list[Inst]:
    """Decodes `code` (loaded at VA `base`) linearly, up to the first s_code_end if asked."""
    out: list[Inst] = []
    pos = 0
    while pos < len(code):
        inst = decode_one(code, pos, base + pos)
        if stop_at_code_end and inst.name == "s_code_end":
            break
        out.append(inst)
        pos += inst.size
    return out
