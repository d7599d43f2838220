"""Regenerates `opcodes.py` (the gfx1100 opcode → mnemonic tables) from LLVM's own disassembler.

Development tool, not used at run time (run from a checkout): `python -m tools.rdna3_gen_opcodes
[--check]`. For every encoding it builds one instruction word per opcode value with harmless operand
fields, feeds them to `llvm-mc-16 --disassemble -mcpu=gfx1100` (one instruction per line; LLVM
decodes each line separately and warns about the lines it cannot decode) and records the mnemonic it
prints; the opcodes LLVM decodes only with GLC or GDS set (the csub atomics, the GDS-only DS
opcodes) get candidates with that bit. `--check` compares the result with the committed tables
instead of writing them (the test suite runs this when llvm-mc-16 is installed).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

LLVM_MC = "llvm-mc-16"
NULL, V0 = 0x7C, 256


def _words(enc: str, op: int) -> list[list[int]]:
    """Candidate instruction words (dword lists) for one opcode; the first LLVM accepts wins.

    LLVM's decoder insists that operand fields an opcode does not use are zero and that register
    tuples are aligned, so each encoding gets a few variants of its operand fields.
    """
    if enc == "SOP2":
        return [[2 << 30 | op << 23 | 0 << 16 | s1 << 8 | 2] for s1 in (1, 4)]
    if enc == "SOPK":
        w = 0b1011 << 28 | op << 23
        return [[w], [w | 4 << 16 | 1], [w | 0x1801, 0]]  # the last has a literal (setreg_imm32)
    if enc == "SOP1":
        return [[0x17D << 23 | d << 16 | op << 8 | s0] for d in (0, 4) for s0 in (2, 0)]
    if enc == "SOPC":
        return [[0x17E << 23 | op << 16 | 1 << 8 | 2], [0x17E << 23 | op << 16 | 4 << 8 | 2]]
    if enc == "SOPP":
        return [[0x17F << 23 | op << 16 | 0]]
    if enc == "SMEM":
        return [[0b111101 << 26 | op << 18 | d << 6 | b, NULL << 25 | 0]
                for d in (4, 0) for b in (0, 2)]
    if enc == "VOP1":
        return [[0b0111111 << 25 | 0 << 17 | op << 9 | V0]]
    if enc == "VOP2":
        return [[op << 25 | 0 << 17 | 1 << 9 | V0]]
    if enc == "VOPC":
        return [[0b0111110 << 25 | op << 17 | 1 << 9 | V0]]
    if enc == "VOP3":
        return [[0b110101 << 26 | op << 16 | sdst << 8, src2 << 18 | src1 << 9 | V0]
                for sdst in (0, 0x6A) for src1 in (V0 + 2, 0) for src2 in (0, V0 + 4, 4)]
    if enc == "VOP3P":
        return [[0xCC << 24 | op << 16, hi << 27 | src2 << 18 | (V0 + 2) << 9 | V0]
                for hi in (3, 0) for src2 in (V0 + 4, 0)]
    if enc == "DS":
        return [[0b110110 << 26 | op << 18, vd << 24 | d1 << 16 | d0 << 8 | 0]
                for vd in (0, 4) for d0 in (0, 2) for d1 in (0, 4)]
    if enc in ("FLAT", "SCRATCH", "GLOBAL"):
        seg = {"FLAT": 0, "SCRATCH": 1, "GLOBAL": 2}[enc]
        return [[0b110111 << 26 | op << 18 | seg << 16, vd << 24 | sve << 23 | sa << 16 | d << 8]
                for vd in (0, 4) for d in (0, 2) for sa in (NULL, 0) for sve in (0, 1)]
    if enc == "MIMG":  # dmask 0xf, 2D, v[4:7] from v[4:5], s[8:15]
        return [[0b111100 << 26 | op << 18 | 0xF04, 0x00020404],
                [0b111100 << 26 | op << 18 | 0x100, 0x00020404]]
    if enc == "MUBUF":
        return [[0b111000 << 26 | op << 18, 0x80 << 24 | 0 << 16 | vd << 8 | 0] for vd in (0, 4)]
    if enc == "MTBUF":  # format 1 (BUF_FMT_8_UNORM, LLVM's default)
        return [[0b111010 << 26 | 1 << 19 | op << 15, 0x80 << 24 | vd << 8] for vd in (0, 4)]
    raise ValueError(enc)


def _flag_words(enc: str, op: int) -> list[list[int]]:
    """Further candidates for the opcodes LLVM decodes only with a flag set: the atomics whose
    GLC must be 1 (buffer/global_atomic_csub_u32) and the GDS-only DS opcodes (GDS = 1)."""
    bit = {"MUBUF": 14, "FLAT": 14, "SCRATCH": 14, "GLOBAL": 14, "DS": 17}.get(enc)
    return [] if bit is None else [[w[0] | 1 << bit] + w[1:] for w in _words(enc, op)]


OP_BITS = {"SOP2": 7, "SOPK": 5, "SOP1": 8, "SOPC": 7, "SOPP": 7, "SMEM": 8, "VOP1": 8, "VOP2": 6,
           "VOPC": 8, "VOP3": 10, "VOP3P": 7, "DS": 8, "FLAT": 7, "SCRATCH": 7, "GLOBAL": 7,
           "MUBUF": 8, "MTBUF": 4, "MIMG": 8}
# Opcode values that collide with another encoding's prefix (SOP2 ops >= 0x60 are SOPK/SOP1/...).
OP_LIMIT = {"SOP2": 0x60, "SOPK": 0x1D, "VOP2": 0x3E}
VOPD_X = {0: "v_dual_fmac_f32", 1: "v_dual_fmaak_f32", 2: "v_dual_fmamk_f32", 3: "v_dual_mul_f32",
          4: "v_dual_add_f32", 5: "v_dual_sub_f32", 6: "v_dual_subrev_f32", 7: "v_dual_mul_dx9_zero_f32",
          8: "v_dual_mov_b32", 9: "v_dual_cndmask_b32", 10: "v_dual_max_f32", 11: "v_dual_min_f32",
          12: "v_dual_dot2acc_f32_f16", 13: "v_dual_dot2acc_f32_bf16"}


def _disassemble(lines: list[str]) -> dict[int, str]:
    """Line index → mnemonic for the lines llvm-mc decodes.

    llvm-mc decodes its input as one byte stream, so each candidate is followed by two s_nop
    (room for a literal the candidate may claim) and a marker line `s_movk_i32 s101, INDEX`; the
    printed instructions are matched to their input by the markers.
    """
    nops = " 0x00 0x00 0x80 0xbf" * 2
    text = []
    for i, line in enumerate(lines):
        mark = (0b1011 << 28 | 0 << 23 | 101 << 16 | i).to_bytes(4, "little")
        text += [line + nops, " ".join(f"{b:#04x}" for b in mark)]
    res = subprocess.run([LLVM_MC, "--disassemble", "-arch=amdgcn", "-mcpu=gfx1100"],
                         input="\n".join(text) + "\n", capture_output=True, text=True, check=True)
    # A line LLVM warns about is invalid even if it decodes the dwords after the bad one.
    bad = {(int(m.group(1)) - 1) // 2 for m in re.finditer(r"<stdin>:(\d+):\d+: warn", res.stderr)}
    found: dict[int, str] = {}
    pending: list[str] = []
    for ln in res.stdout.splitlines():
        parts = ln.split()
        if not parts or parts[0].startswith("."):
            continue
        m = re.fullmatch(r"s_movk_i32 s101, (0x[0-9a-f]+|\d+)", " ".join(parts))
        if m:
            rest_nops = all(p == "s_nop" for p in pending[1:])
            if len(pending) >= 2 and rest_nops and int(m.group(1), 0) not in bad:
                found[int(m.group(1), 0)] = pending[0]
            pending = []
        else:
            pending.append(parts[0])
    return found


def _strip(name: str) -> str:
    return re.sub(r"_e(32|64)$", "", name)


def generate() -> dict[str, dict[int, str]]:
    """Encoding name → {opcode: mnemonic} as llvm-mc-16 decodes them for gfx1100."""
    tables: dict[str, dict[int, str]] = {}
    for enc, bits in OP_BITS.items():
        ops = range(OP_LIMIT.get(enc, 1 << bits))
        cands = {op: _words(enc, op) + _flag_words(enc, op) for op in ops}
        table: dict[int, str] = {}
        for k in range(max(len(c) for c in cands.values())):
            todo = [op for op in ops if op not in table and k < len(cands[op])]
            lines = [" ".join(f"{b:#04x}" for w in cands[op][k] for b in w.to_bytes(4, "little"))
                     for op in todo]
            for i, name in _disassemble(lines).items():
                if name != "v_illegal":
                    table[todo[i]] = _strip(name)
        tables[enc] = dict(sorted(table.items()))
    tables["VOPD_X"] = dict(VOPD_X)
    tables["VOPD_Y"] = {**{k: v for k, v in VOPD_X.items() if k < 13}, 16: "v_dual_add_nc_u32",
                        17: "v_dual_lshlrev_b32", 18: "v_dual_and_b32"}
    return tables


def render(tables: dict[str, dict[int, str]]) -> str:
    out = ['"""gfx1100 (RDNA3) opcode → mnemonic tables, one dict per encoding.',
           "",
           "Generated by tools/rdna3_gen_opcodes.py from llvm-mc-16's disassembler; do not edit "
           "by hand.",
           "VOP3 holds every 10-bit VOP3/VOP3SD opcode, including the VOPC (0-255), VOP2 (256+)",
           "and VOP1 (384+) opcodes in their VOP3 form. _e32/_e64 suffixes are stripped.",
           '"""', "", "TABLES: dict[str, dict[int, str]] = {"]
    for enc, table in tables.items():
        out.append(f"    {enc!r}: {{")
        for op, name in table.items():
            out.append(f"        {op:#05x}: {name!r},")
        out.append("    },")
    out.append("}")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if shutil.which(LLVM_MC) is None:
        print(f"{LLVM_MC} not found (Debian package llvm-16)", file=sys.stderr)
        return 2
    text = render(generate())
    path = Path(__file__).resolve().parents[1] / "runtime" / "drivers" / "mock" / "rdna3" / \
        "opcodes.py"
    if "--check" in argv:
        if path.read_text() != text:
            print("opcodes.py differs from what llvm-mc-16 decodes", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
