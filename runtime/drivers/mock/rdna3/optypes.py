"""Operand types of RDNA3 instructions, derived from their mnemonics.

AMD's mnemonics end in the operand types (`v_cvt_f32_u32`: an f32 result from a u32 source,
`v_mad_u64_u32`: a u64 result from u32 multiplicands), so the types are read from the name with a
handful of documented exceptions. Both the executor (how many registers an operand spans and how
to interpret its bits) and the disassembler (v[0:1] vs v0) use this.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_TYPE = re.compile(r"^[fiub](8|16|24|32|64|128)$")


@dataclass(frozen=True)
class Sig:
    """Result type and source types, as 'f32', 'u64', ...; `nsrc` counts encoded sources."""

    dst: str
    srcs: tuple[str, ...]

    @property
    def nsrc(self) -> int:
        return len(self.srcs)


def bits(t: str) -> int:
    return int(t[1:])


def _types(name: str) -> list[str]:
    out: list[str] = []
    for tok in reversed(name.split("_")):
        if not _TYPE.match(tok):
            break
        out.insert(0, tok)
    return out


# Sources whose type differs from the one the mnemonic's suffix gives (shift amounts, class masks,
# exponents, lane selects ...).
_SRC_OVERRIDES: dict[str, tuple[str, ...]] = {
    "v_lshlrev_b64": ("u32", "b64"), "v_lshrrev_b64": ("u32", "b64"),
    "v_ashrrev_i64": ("u32", "i64"), "v_ldexp_f32": ("f32", "i32"),
    "v_ldexp_f64": ("f64", "i32"), "v_trig_preop_f64": ("f64", "u32"),
    "v_cmp_class_f32": ("f32", "u32"), "v_cmpx_class_f32": ("f32", "u32"),
    "v_cmp_class_f64": ("f64", "u32"), "v_cmpx_class_f64": ("f64", "u32"),
    "v_cmp_class_f16": ("f16", "u32"), "v_cmpx_class_f16": ("f16", "u32"),
    "v_mad_u64_u32": ("u32", "u32", "u64"), "v_mad_i64_i32": ("i32", "i32", "i64"),
    "v_readlane_b32": ("b32", "u32"), "v_writelane_b32": ("b32", "u32"),
    "s_lshl_b64": ("b64", "u32"), "s_lshr_b64": ("b64", "u32"), "s_ashr_i64": ("i64", "u32"),
    "s_bfe_u64": ("u64", "u32"), "s_bfe_i64": ("i64", "u32"), "s_bfm_b64": ("b32", "b32"),
    "s_bitcmp0_b64": ("b64", "u32"), "s_bitcmp1_b64": ("b64", "u32"),
    "s_bitset0_b64": ("u32",), "s_bitset1_b64": ("u32",), "s_getpc_b64": (),
    "v_mbcnt_lo_u32_b32": ("u32", "u32"), "v_mbcnt_hi_u32_b32": ("u32", "u32"),
    "v_cvt_pk_u16_u32": ("u32", "u32"), "v_cvt_pk_i16_i32": ("i32", "i32"),
    "v_cvt_pknorm_i16_f32": ("f32", "f32"), "v_cvt_pknorm_u16_f32": ("f32", "f32"),
    "v_cvt_pk_i16_f32": ("f32", "f32"), "v_cvt_pk_u16_f32": ("f32", "f32"),
    "v_cvt_pk_u8_f32": ("f32", "u32", "u32"), "v_pack_b32_f16": ("f16", "f16"),
    "v_cvt_pk_norm_i16_f16": ("f16", "f16"), "v_cvt_pk_norm_u16_f16": ("f16", "f16"),
    "v_div_fixup_f32": ("f32", "f32", "f32"),
    "v_mad_u32_u16": ("u16", "u16", "u32"), "v_mad_i32_i16": ("i16", "i16", "i32"),
    "v_cvt_pk_rtz_f16_f32": ("f32", "f32"), "v_cvt_off_f32_i4": ("u32",),
    "v_sat_pk_u8_i16": ("b32",), "v_sad_u16": ("u32", "u32", "u32"),
    "v_qsad_pk_u16_u8": ("b64", "b32", "b64"), "v_mqsad_pk_u16_u8": ("b64", "b32", "b64"),
    "v_mqsad_u32_u8": ("b64", "b32", "b32"), "v_permlane16_b32": ("b32", "u32", "u32"),
    "v_permlanex16_b32": ("b32", "u32", "u32"), "v_dot2_f16_f16": ("b32", "b32", "f16"),
    "v_dot2_bf16_bf16": ("b32", "b32", "b16"), "v_dot2acc_f32_f16": ("b32", "b32"),
    "v_pk_fmac_f16": ("b32", "b32"), "v_cndmask_b16": ("b16", "b16"),
}
_DST_OVERRIDES: dict[str, str] = {
    "v_frexp_exp_i32_f64": "i32", "v_frexp_exp_i32_f32": "i32", "v_cvt_pk_u16_u32": "b32",
    "v_cvt_pk_i16_i32": "b32", "v_cvt_pknorm_i16_f32": "b32", "v_cvt_pknorm_u16_f32": "b32",
    "v_cvt_pk_i16_f32": "b32", "v_cvt_pk_u16_f32": "b32", "v_cvt_pk_u8_f32": "b32",
    "v_pack_b32_f16": "b32", "s_bfm_b64": "b64", "s_bitset0_b64": "b64", "s_bitset1_b64": "b64",
    "v_cvt_pk_norm_i16_f16": "b32", "v_cvt_pk_norm_u16_f16": "b32",
    "v_cvt_pk_rtz_f16_f32": "b32", "v_cvt_off_f32_i4": "f32", "v_sat_pk_u8_i16": "b16",
    "v_sad_u16": "u32", "v_qsad_pk_u16_u8": "b64", "v_mqsad_pk_u16_u8": "b64",
    "v_mqsad_u32_u8": "b128", "v_dot2_f16_f16": "f16", "v_dot2_bf16_bf16": "b16",
    "v_dot2acc_f32_f16": "f32", "v_pk_fmac_f16": "b32",
}


def _nsrc_valu(name: str, enc: str, op: int) -> int:
    if enc == "VOP1" or (enc in ("VOP3", "VOP3SD") and 384 <= op < 512):
        return 0 if name in ("v_nop", "v_pipeflush") else 1
    if enc in ("VOP2", "VOPC", "VOPD") or (enc in ("VOP3", "VOP3SD") and op < 384):
        return 2
    if enc in ("VOP3", "VOP3SD"):
        # VOP3-only opcodes: 0x200-0x2FF take three sources, 0x300 and up two (ISA table 15.10).
        return 3 if op < 0x300 else 2
    return 3


@lru_cache(maxsize=None)
def signature(name: str, enc: str = "VOP3", op: int = 512) -> Sig:
    """Operand types of a VALU or SALU instruction (encoded sources only)."""
    name = name.removeprefix("v_dual_")
    if not name.startswith("v_") and not name.startswith("s_"):
        name = "v_" + name
    types = _types(name)
    base = types[-1] if types else "b32"
    dst = types[0] if types else "b32"
    if name.startswith("v_cmp"):
        dst = "b32"  # a lane mask in wave32
    if name.startswith("s_"):
        n = 1 if enc in ("SOP1",) else 2
        if name.startswith("s_cmp") or name.startswith("s_bitcmp"):
            dst = "b32"
    else:
        n = _nsrc_valu(name, enc, op)
    srcs = _SRC_OVERRIDES.get(name, tuple([base] * n))
    if name in ("v_fmac_f32", "v_fmac_f64", "v_fmac_f16", "v_fmac_dx9_zero_f32"):
        srcs = srcs[:2]
    return Sig(_DST_OVERRIDES.get(name, dst), srcs[:n] if n < len(srcs) else srcs)
