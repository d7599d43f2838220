"""Renders decoded instructions in LLVM's gfx11 assembly syntax.

Used for error messages (an unknown instruction is named as LLVM would print it) and by the tests,
which compare the text with `llvm-objdump-16 -d --mcpu=gfx1100` instruction by instruction.
"""
from __future__ import annotations

import struct

from .buffer_formats import FORMATS
from .decode import DPP8, DPP8FI, DPP16, LITERAL, NULL, VGPR0, Inst
from .optypes import bits, signature

_SPECIAL = {106: "vcc_lo", 107: "vcc_hi", 124: "null", 125: "m0", 126: "exec_lo", 127: "exec_hi",
            235: "src_shared_base", 236: "src_shared_limit", 237: "src_private_base",
            238: "src_private_limit", 239: "src_pops_exiting_wave_id", 251: "src_vccz",
            252: "src_execz", 253: "src_scc", 254: "src_lds_direct"}
_FLOAT_CONST = {240: "0.5", 241: "-0.5", 242: "1.0", 243: "-1.0", 244: "2.0", 245: "-2.0",
                246: "4.0", 247: "-4.0", 248: "0.15915494"}
_DELAY_ID = ["NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4", "TRANS32_DEP_1",
             "TRANS32_DEP_2", "TRANS32_DEP_3", "FMA_ACCUM_CYCLE_1", "SALU_CYCLE_1",
             "SALU_CYCLE_2", "SALU_CYCLE_3"]
_DELAY_SKIP = ["SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4"]
_MSG = {3: "MSG_DEALLOC_VGPRS", 1: "MSG_INTERRUPT", 2: "MSG_HS_TESSFACTOR",
        10: "MSG_RTN_GET_DOORBELL"}


def _reg(prefix: str, n: int, width: int) -> str:
    cnt = max(1, width // 32)
    return f"{prefix}{n}" if cnt == 1 else f"{prefix}[{n}:{n + cnt - 1}]"


def sreg(n: int, width: int = 32) -> str:
    """An SGPR-range operand (0-127) in LLVM syntax."""
    if width == 64 and n in (106, 126):
        return "vcc" if n == 106 else "exec"
    if n in _SPECIAL:
        return _SPECIAL[n]
    if 108 <= n <= 123:
        return _reg("ttmp", n - 108, width)
    return _reg("s", n, width)


_INLINE_F32_BITS = {0x3F000000: "0.5", 0xBF000000: "-0.5", 0x3F800000: "1.0",
                    0xBF800000: "-1.0", 0x40000000: "2.0", 0xC0000000: "-2.0",
                    0x40800000: "4.0", 0xC0800000: "-4.0", 0x3E22F983: "0.15915494"}


def src(code: int, width: int, literal: int | None, typ: str = "b32") -> str:
    """A 9-bit (or 8-bit scalar) source operand."""
    if code >= VGPR0:
        return _reg("v", code - VGPR0, width)
    if code < 128:
        return sreg(code, width)
    if code == 128:
        return "0"
    if 129 <= code <= 192:
        return str(code - 128)
    if 193 <= code <= 208:
        return str(192 - code)
    if code in _FLOAT_CONST:
        if code == 248 and typ == "f64":
            return "0.15915494309189532"
        return _FLOAT_CONST[code]
    if code == LITERAL:
        lit = literal if literal is not None else 0
        if width == 32:
            # LLVM prints a 32-bit literal that an inline constant could have encoded as that
            # constant (AMDGPUInstPrinter::printImmediate32): s_addc_u32 s1, s1, -1.
            signed = lit - (1 << 32) if lit >= 1 << 31 else lit
            if -16 <= signed <= 64:
                return str(signed)
            if lit in _INLINE_F32_BITS:
                return _INLINE_F32_BITS[lit]
        return f"{lit:#x}"
    return _SPECIAL.get(code, f"<src {code}>")


def _vmods(text: str, i: int, f: dict[str, int], typ: str) -> str:
    if typ[0] != "f":
        return text
    if f.get("abs", 0) >> i & 1:
        text = f"|{text}|"
    if f.get("neg", 0) >> i & 1:
        text = f"-{text}"
    return text


def _sopp(inst: Inst) -> str:
    imm = inst.f["simm16"]
    name = inst.name
    if name == "s_waitcnt":
        vm, exp, lgkm = imm >> 10 & 0x3F, imm & 7, imm >> 4 & 0x3F
        parts = [f"vmcnt({vm})" if vm != 0x3F else "", f"expcnt({exp})" if exp != 7 else "",
                 f"lgkmcnt({lgkm})" if lgkm != 0x3F else ""]
        return f"{name} " + (" ".join(p for p in parts if p) or "0")
    if name == "s_delay_alu":
        id0, skip, id1 = imm & 0xF, imm >> 4 & 7, imm >> 7 & 0xF
        parts = [f"instid0({_DELAY_ID[id0]})" if id0 else "",
                 f"instskip({_DELAY_SKIP[skip]})" if skip else "",
                 f"instid1({_DELAY_ID[id1]})" if id1 else ""]
        return f"{name} " + " | ".join(p for p in parts if p)
    if name == "s_sendmsg":
        return f"{name} sendmsg({_MSG.get(imm, imm)})"
    if name in ("s_endpgm", "s_barrier", "s_code_end", "s_icache_inv", "s_wakeup",
                "s_endpgm_saved", "s_ttracedata", "s_wait_idle"):
        return name
    if name in ("s_nop", "s_sleep", "s_setprio", "s_trap", "s_setkill", "s_sethalt"):
        return f"{name} {imm}"
    if name.startswith("s_branch") or name.startswith("s_cbranch"):
        return f"{name} {imm}"
    return f"{name} {imm:#x}"


def _salu(inst: Inst) -> str:
    f, name, enc = inst.f, inst.name, inst.enc
    if enc == "SOPP":
        return _sopp(inst)
    if enc == "SOPK":
        if name == "s_waitcnt_vscnt" or name.startswith("s_waitcnt_"):
            return f"{name} {sreg(f['sdst'])}, {f['simm16']:#x}"
        if name in ("s_version", "s_setkill"):
            return f"{name} {f['simm16']:#x}"
        return f"{name} {sreg(f['sdst'])}, {f['simm16']:#x}"
    sig = signature(name, enc)
    lit = inst.literal
    ops = []
    if enc in ("SOP1", "SOP2") and sig.dst and name not in ("s_setpc_b64",):
        ops.append(sreg(f["sdst"], bits(sig.dst)))
    for i, typ in enumerate(sig.srcs):
        ops.append(src(f[f"ssrc{i}"], bits(typ), lit, typ))
    return f"{name} " + ", ".join(ops) if ops else name


def _smem(inst: Inst) -> str:
    f = inst.f
    sizes = {"b32": 4, "b64": 8, "b128": 16, "b256": 32, "b512": 64}
    nbytes = sizes.get(inst.name.split("_")[-1], 4)
    base_w = 128 if "buffer" in inst.name else 64
    text = f"{inst.name} {sreg(f['sdata'], nbytes * 8)}, {sreg(f['sbase'], base_w)}, "
    if f["soffset"] != NULL and f["offset"]:
        text += f"{sreg(f['soffset'])} offset:{f['offset']:#x}"
    elif f["offset"] or f["soffset"] == NULL and f["offset"]:
        text += f"{f['offset']:#x}"
    else:
        text += sreg(f["soffset"])
    return text + (" glc" if f["glc"] else "") + (" dlc" if f["dlc"] else "")


_NO_VOP3_FORM = frozenset({"v_permlane64_b32"})


def _valu(inst: Inst) -> str:
    f, name, enc = inst.f, inst.name, inst.enc
    dpp = f.get("src0") in (DPP16, DPP8, DPP8FI)
    if dpp:   # the DPP source VGPR, shown as src0; the pattern follows the operands
        f = {**f, "src0": VGPR0 + f["dpp_vgpr"]}
    sig = signature(name, enc, inst.op)
    lit = inst.literal
    vop3 = enc in ("VOP3", "VOP3SD")
    is_cmp = name.startswith("v_cmp")
    promoted = vop3 and inst.op < 512  # a VOP1/VOP2/VOPC opcode in its VOP3 form
    # (no _e32 where the instruction has no VOP3 form to tell it from)
    shown = name + ("_e64" if promoted else "_e32" if enc in ("VOP1", "VOP2", "VOPC")
                    and name not in _NO_VOP3_FORM else "")
    if dpp:
        shown = name + ("_e64_dpp" if vop3 else "" if enc == "VOPC" else "_dpp")
    srcs = [src(f[f"src{i}"], bits(t), lit, t) for i, t in enumerate(sig.srcs)]
    if vop3 or "dpp_ctrl" in f:
        srcs = [_vmods(s, i, f, t) for i, (s, t) in enumerate(zip(srcs, sig.srcs))]
    ops: list[str] = []
    if is_cmp:
        if not name.startswith("v_cmpx"):
            ops.append(sreg(f["vdst"]) if vop3 else "vcc_lo")
    elif name == "v_readfirstlane_b32" or name == "v_readlane_b32":
        ops.append(sreg(f["vdst"]))
    elif sig.nsrc or name != "v_nop":
        ops.append(_reg("v", f["vdst"], bits(sig.dst)))
    if enc == "VOP3SD":
        ops.append(sreg(f["sdst"]))
    if name in ("v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32"):
        if enc == "VOP2":
            ops += [sreg(106)] + srcs + [sreg(106)]
        else:
            ops += srcs + [src(f["src2"], 32, lit)]
    elif name == "v_cndmask_b32":
        ops += srcs + ([sreg(106)] if enc == "VOP2" else [src(f["src2"], 32, lit)])
    elif name in ("v_fmamk_f32", "v_fmamk_f16"):
        ops += [srcs[0], f"{lit:#x}", srcs[1]]
    elif name in ("v_fmaak_f32", "v_fmaak_f16"):
        ops += srcs + [f"{lit:#x}"]
    else:
        ops += srcs
    text = f"{shown} " + ", ".join(ops) if ops else shown
    if name in ("v_permlane16_b32", "v_permlanex16_b32") and f.get("opsel", 0) & 3:
        text += f" op_sel:[{f['opsel'] & 1},{f['opsel'] >> 1 & 1}]"
    if vop3:
        if f.get("clamp"):
            text += " clamp"
        if f.get("omod"):
            text += {1: " mul:2", 2: " mul:4", 3: " div:2"}[f["omod"]]
    return text + (_dpp_text(f) if dpp else "")


def _dpp_text(f: dict[str, int]) -> str:
    """The DPP16/DPP8 pattern and flags, as LLVM prints them after the operands."""
    fi = " fi:1" if f["fi"] else ""
    if "dpp8" in f:
        return " dpp8:[" + ",".join(str(f["dpp8"] >> (3 * i) & 7) for i in range(8)) + "]" + fi
    c = f["dpp_ctrl"]
    n = c & 15
    if c <= 0xFF:
        pat = "quad_perm:[" + ",".join(str(c >> (2 * i) & 3) for i in range(4)) + "]"
    else:
        pat = {0x100: f"row_shl:{n}", 0x110: f"row_shr:{n}", 0x120: f"row_ror:{n}",
               0x150: f"row_share:{n}", 0x160: f"row_xmask:{n}"}.get(
            c & ~15, {0x140: "row_mirror", 0x141: "row_half_mirror"}.get(c, f"dpp_ctrl:{c:#x}"))
    return f" {pat} row_mask:{f['row_mask']:#x} bank_mask:{f['bank_mask']:#x}" + \
        (" bound_ctrl:1" if f["bound_ctrl"] else "") + fi


_WMMA_REGS = {"f16": 8, "bf16": 8, "iu8": 4, "iu4": 2}


def _vop3p(inst: Inst) -> str:
    """VOP3P in LLVM's syntax: modifiers printed where they differ from the defaults (OP_SEL_HI
    all ones, except V_FMA_MIX*, whose NEG/NEG_HI show as -x and |x|)."""
    f, name = inst.f, inst.name
    dpp = f.get("src0") in (DPP16, DPP8, DPP8FI)
    if dpp:
        f = {**f, "src0": VGPR0 + f["dpp_vgpr"]}
    mix = name.startswith("v_fma_mix")
    nsrc = 3 if mix or "dot" in name or "wmma" in name or name in (
        "v_pk_fma_f16", "v_pk_mad_u16", "v_pk_mad_i16") else 2
    widths = [32] * nsrc
    dwidth = 32
    if name.startswith("v_wmma_"):
        k = _WMMA_REGS[name.rsplit("_", 1)[1]] * 32
        widths, dwidth = [k, k, 256], 256
    ops = [_reg("v", f["vdst"], dwidth)]
    for i in range(nsrc):
        text = src(f[f"src{i}"], widths[i], inst.literal, "f16")
        if mix and f["neg_hi"] >> i & 1:
            text = f"|{text}|"
        if mix and f["neg"] >> i & 1:
            text = f"-{text}"
        ops.append(text)

    def arr(v: int) -> str:
        return "[" + ",".join(str(v >> i & 1) for i in range(nsrc)) + "]"
    mask = (1 << nsrc) - 1
    text = f"{name}{'_e64_dpp' if dpp else ''} " + ", ".join(ops)
    if f["opsel"] & mask:
        text += f" op_sel:{arr(f['opsel'])}"
    # llvm-mc-16 omits OP_SEL_HI at its default: all ones, but all zeros for V_FMA_MIX* and
    # for the DPP forms.
    if (f["opsel_hi"] & mask) != (0 if mix or dpp else mask):
        text += f" op_sel_hi:{arr(f['opsel_hi'])}"
    if not mix and f["neg"] & mask:
        text += f" neg_lo:{arr(f['neg'])}"
    if not mix and f["neg_hi"] & mask:
        text += f" neg_hi:{arr(f['neg_hi'])}"
    return text + (" clamp" if f["clamp"] else "") + (_dpp_text(f) if dpp else "")


def _vopd_half(name: str, vdst: int, s0: int, vs1: int, lit: int | None) -> str:
    sig = signature(name, "VOPD")
    a = src(s0, 32, lit, "f32")
    b = src(vs1, 32, lit)
    if name == "v_dual_mov_b32":
        return f"{name} v{vdst}, {a}"
    if name == "v_dual_fmamk_f32":
        return f"{name} v{vdst}, {a}, {lit:#x}, {b}"
    if name == "v_dual_fmaak_f32":
        return f"{name} v{vdst}, {a}, {b}, {lit:#x}"
    if name == "v_dual_cndmask_b32":
        return f"{name} v{vdst}, {a}, {b}"  # VCC is implicit (LLVM does not print it)
    del sig
    return f"{name} v{vdst}, {a}, {b}"


def _ds_gds_only(inst: Inst) -> str:
    """The GDS-only DS opcodes: GWS ops (the count VGPR in the ADDR field), ordered count and
    the GS register adds (a 64-bit return)."""
    f, name = inst.f, inst.name
    if name in ("ds_gws_init", "ds_gws_sema_br", "ds_gws_barrier"):
        parts = [f"v{f['addr']}"]
    elif name == "ds_ordered_count":
        parts = [f"v{f['vdst']}", f"v{f['addr']}"]
    elif name.endswith("_gs_reg_rtn"):
        parts = [_reg("v", f["vdst"], 64), f"v{f['data0']}"]
    else:
        parts = []
    off = f["offset0"] | f["offset1"] << 8
    return " ".join([name, ", ".join(parts)] if parts else [name]) \
        + (f" offset:{off}" if off else "") + (" gds" if f["gds"] else "")


def _swizzle(off: int) -> str:
    """ds_swizzle_b32's offset as llvm-objdump writes it: swizzle(QUAD_PERM,...) for the
    quad-permute mode, the named bit-mask patterns (SWAP, REVERSE, BROADCAST, else BITMASK_PERM
    with a per-bit "01pi" mask, most significant bit first), the number for the other modes."""
    if off & 0xFF00 == 0x8000:
        return "swizzle(QUAD_PERM," + ",".join(str(off >> (2 * i) & 3) for i in range(4)) + ")"
    if off & 0x8000:
        return str(off)
    and_m, or_m, xor_m = off & 0x1F, off >> 5 & 0x1F, off >> 10 & 0x1F
    if and_m == 0x1F and or_m == 0 and bin(xor_m).count("1") == 1:
        return f"swizzle(SWAP,{xor_m})"
    if and_m == 0x1F and or_m == 0 and xor_m and not xor_m & (xor_m + 1):
        return f"swizzle(REVERSE,{xor_m + 1})"
    size = 0x1F - and_m + 1
    if size > 1 and not size & (size - 1) and or_m < size and xor_m == 0:
        return f"swizzle(BROADCAST,{size},{or_m})"
    p0, p1 = or_m ^ xor_m, ((0x1F & and_m) | or_m) ^ xor_m
    bits = "".join(("1" if p0 & b else "0") if p0 & b == p1 & b else ("i" if p0 & b else "p")
                   for b in (16, 8, 4, 2, 1))
    return f'swizzle(BITMASK_PERM,"{bits}")'


def _mem(inst: Inst) -> str:
    f, name = inst.f, inst.name
    if inst.enc == "DS":
        parts = []
        if name.startswith("ds_gws_") or name in ("ds_ordered_count", "ds_add_gs_reg_rtn",
                                                  "ds_sub_gs_reg_rtn"):
            return _ds_gds_only(inst)
        is_load = "load" in name or "_rtn" in name or name in ("ds_swizzle_b32", "ds_bpermute_b32",
                                                               "ds_permute_b32", "ds_consume",
                                                               "ds_append")
        width = 32
        for key, w in (("b64", 64), ("b96", 96), ("b128", 128)):
            if key in name:
                width = w
        dwidth = width * (2 if "2addr" in name and "load" in name else 1)
        if is_load:
            parts.append(_reg("v", f["vdst"], dwidth))
        if name not in ("ds_consume", "ds_append", "ds_nop"):
            parts.append(f"v{f['addr']}")
        if not name.startswith("ds_load") and name not in ("ds_swizzle_b32", "ds_consume",
                                                           "ds_append", "ds_nop"):
            parts.append(_reg("v", f["data0"], width))
            if "2addr" in name or "cmpstore" in name or "mskor" in name:
                parts.append(_reg("v", f["data1"], width))
        text = f"{name} " + ", ".join(parts)
        if "2addr" in name:
            if f["offset0"]:
                text += f" offset0:{f['offset0']}"
            if f["offset1"]:
                text += f" offset1:{f['offset1']}"
        else:
            off = f["offset0"] | f["offset1"] << 8
            if off:
                text += f" offset:{_swizzle(off) if name == 'ds_swizzle_b32' else off}"
        return text + (" gds" if f["gds"] else "")
    # FLAT / GLOBAL / SCRATCH
    width = 32
    for key, w in (("b64", 64), ("b96", 96), ("b128", 128), ("u64", 64), ("i64", 64)):
        if name.endswith(key):
            width = w
    atomic = "atomic" in name
    is_load = "load" in name or (atomic and bool(f["glc"]))
    parts = []
    if is_load:
        dw = width // 2 if "cmpswap" in name else width
        parts.append(_reg("v", f["vdst"], dw))
    saddr = f["saddr"]
    off_saddr = saddr in (NULL, 0x7F)
    parts.append(_reg("v", f["addr"], 64 if (off_saddr and not name.startswith("scratch")) else 32)
                 if not (name.startswith("scratch") and not f["sve"]) else "off")
    if not (name.startswith("global_load") or name.startswith("flat_load")
            or name.startswith("scratch_load")):
        parts.append(_reg("v", f["data"], 2 * width if "cmpswap" in name else width))
    if not name.startswith("flat"):
        parts.append("off" if off_saddr else sreg(saddr, 64 if name.startswith("global") else 32))
    text = f"{name} " + ", ".join(parts)
    if f["offset"]:
        text += f" offset:{f['offset']}"
    return text + (" glc" if f["glc"] else "") + (" slc" if f["slc"] else "") + \
        (" dlc" if f["dlc"] else "")


def _mubuf(inst: Inst) -> str:
    f, name = inst.f, inst.name
    width = 32
    for key, w in (("b64", 64), ("b96", 96), ("b128", 128), ("u64", 64), ("i64", 64)):
        if name.endswith(key):
            width = w
    if "cmpswap" in name:
        width *= 2
    comps = name.rsplit("_", 1)[-1]
    if "format" in name and set(comps) <= set("xyzw"):
        width = 32 * (-(-len(comps) // 2) if "d16" in name else len(comps))
    nva = 2 if f["offen"] and f["idxen"] else 1
    vaddr = _reg("v", f["vaddr"], 32 * nva) if f["offen"] or f["idxen"] else "off"
    vdata = "" if "_lds_" in name else f"{_reg('v', f['vdata'], width)}, "
    text = f"{name} {vdata}{vaddr}, {_reg('s', f['srsrc'], 128)}, " \
        f"{src(f['soffset'], 32, None)}"
    if inst.enc == "MTBUF" and f["format"] != 1:   # 1 (BUF_FMT_8_UNORM) is LLVM's default
        fmt = FORMATS.get(f["format"])
        text += f" format:[BUF_FMT_{fmt.name}]" if fmt else f" format:{f['format']}"
    for key in ("offen", "idxen"):
        if f[key]:
            text += f" {key}"
    if f["offset"]:
        text += f" offset:{f['offset']}"
    return text + (" glc" if f["glc"] else "") + (" slc" if f["slc"] else "") + \
        (" dlc" if f["dlc"] else "")


def render(inst: Inst) -> str:
    """LLVM-style text of one instruction (as close to llvm-objdump-16 as the tests need)."""
    enc = inst.enc
    try:
        if enc.startswith("SOP"):
            return _salu(inst)
        if enc == "SMEM":
            return _smem(inst)
        if enc in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD"):
            return _valu(inst)
        if enc == "VOP3P":
            return _vop3p(inst)
        if enc == "VOPD":
            f = inst.f
            x = _vopd_half(inst.name, f["vdstx"], f["srcx0"], f["vsrcx1"], inst.literal)
            y = _vopd_half(inst.name_y, f["vdsty"], f["srcy0"], f["vsrcy1"], inst.literal)
            return f"{x} :: {y}"
        if enc in ("DS", "FLAT"):
            return _mem(inst)
        if inst.name in ("buffer_gl0_inv", "buffer_gl1_inv", "buffer_wbinvl1"):
            return inst.name
        if enc in ("MUBUF", "MTBUF"):
            return _mubuf(inst)
    except (KeyError, TypeError, IndexError, ValueError):
        pass
    words = " ".join(f"{w:08X}" for w in inst.words)
    return f"{inst.name} [{enc} {words}]"


def f32_of(bits32: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits32 & 0xFFFFFFFF))[0]
