"""How many of LLVM's gfx1100 opcodes the interpreter executes, per encoding.

Development tool (run from a checkout): `python -m tools.rdna3_opcode_coverage [-v] [ROW ...]`
prints `accepted/total` for every encoding of `opcodes.TABLES` (plus the DPP16/DPP8 forms of the
VOP1/VOP2/VOPC/VOP3/VOP3P opcodes that take them) and, with -v, each refused opcode and why.

An opcode counts as accepted when one of the instruction words llvm-mc-16 decodes for it (the
candidates of `rdna3_gen_opcodes`, with a few more operand variants) compiles and its compiled slot
runs once on one wave with random register contents. A memory access that faults (the random
addresses map nothing) still counts: the semantics exist; so does a fault the ISA defines
(s_trap without a trap handler) and the fault that stands for what a KFD compute queue's
hardware does (a GDS access, a GWS op outside the queue's empty GWS range: `ops_gds`). Missing
semantics, an unsupported operand or a "bad state" error is a refusal. MIMG is listed but not a goal (no image support in the mock).
"""
from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass, field

import numpy as np

from runtime.drivers.mock.memory import MockMemory, PageFault

from runtime.drivers.mock.rdna3.decode import EXEC_LO, M0, decode_all
from runtime.drivers.mock.rdna3.errors import KernelFault, PageFaultError
from runtime.drivers.mock.rdna3.interp import Program
from runtime.drivers.mock.rdna3.machine import ALL, WaveSet, Machine
from runtime.drivers.mock.rdna3.opcodes import TABLES

from . import rdna3_gen_opcodes as gen

V0 = 256
# The DPP dwords (src0 v0): quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf bound_ctrl:1, and
# dpp8:[0,1,2,3,4,5,6,7] (lane selects, 3 bits each, from bit 8).
DPP16_WORD = 0x1B << 8 | 1 << 19 | 0xF << 24 | 0xF << 28
DPP8_WORD = 0xFAC688 << 8


@dataclass
class Row:
    """One encoding's result: opcodes tried, and the refused ones with the reason."""

    enc: str
    total: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    undecodable: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)   # tried without llvm-mc's word

    @property
    def accepted(self) -> int:
        return self.total - len(self.refused) - len(self.undecodable)


def _vopd_words(op: int, y: bool) -> list[list[int]]:
    """VOPD with the other half a v_dual_mov_b32 (whose vsrc1 field LLVM wants 0); sources in
    distinct VGPR banks, as LLVM insists (srcX0 v1 / srcY0 v2, vsrcX1 v3 / vsrcY1 v4)."""
    opx, opy = (8, op) if y else (op, 8)
    out = []
    for x1, y1 in ((0, 4), (3, 0), (0, 0)) if y else ((3, 0), (0, 0)):
        w0 = 0b110010 << 26 | opx << 22 | opy << 17 | x1 << 9 | (V0 + 1)
        w1 = 0 << 24 | 0 << 17 | y1 << 9 | (V0 + 2)
        out += [[w0, w1], [w0, w1, 0x3F800000]]
    return out


def _vop3_words(op: int) -> list[list[int]]:
    """gen_opcodes' VOP3 candidates, those with a scalar src1 first (lane selects must be)."""
    words = sorted(gen._words("VOP3", op), key=lambda w: (w[1] >> 9 & 0x1FF) >= V0)
    return words + [[w0, w1 & ~0x1FF | 2] for w0, w1 in words]   # and src0 s2


def _dpp_words(enc: str, op: int, dpp8: bool) -> list[list[int]]:
    """The VOP1/VOP2/VOPC/VOP3 instruction of `op` with src0 a DPP16 or DPP8 operand (v0)."""
    src0 = 0xE9 if dpp8 else 0xFA
    ext = [DPP8_WORD if dpp8 else DPP16_WORD]
    if enc == "VOP1":
        return [[0b0111111 << 25 | 2 << 17 | op << 9 | src0] + ext]
    if enc == "VOP2":
        return [[op << 25 | 2 << 17 | 1 << 9 | src0] + ext]
    if enc == "VOPC":
        return [[0b0111110 << 25 | op << 17 | 1 << 9 | src0] + ext]
    if enc == "VOP3P":
        return [[w0, w1 & ~0x1FF | src0] + ext for w0, w1 in gen._words("VOP3P", op)]
    return [[0b110101 << 26 | op << 16 | sdst << 8 | 2, src2 << 18 | src1 << 9 | src0] + ext
            for sdst in (0, 0x6A) for src1 in (V0 + 2, 4) for src2 in (0, V0 + 4, 4)]


def candidates(enc: str) -> dict[int, list[list[int]]]:
    """Opcode → candidate instruction words for one row of the report."""
    if enc in ("VOPD_X", "VOPD_Y"):
        return {op: _vopd_words(op, enc == "VOPD_Y") for op in TABLES[enc]}
    base, _, form = enc.partition("+")
    if form:
        return {op: _dpp_words(base, op, form == "DPP8") for op in TABLES[base]}
    if enc == "VOP3":
        return {op: _vop3_words(op) for op in TABLES[enc]}
    return {op: gen._words(enc, op) + gen._flag_words(enc, op) for op in TABLES[enc]}


def valid_words(enc: str) -> tuple[dict[int, list[list[int]]], dict[int, str]]:
    """(opcode → the candidates llvm-mc-16 decodes, in order; opcode → what llvm-mc printed)."""
    cands = candidates(enc)
    chosen: dict[int, list[list[int]]] = {}
    names: dict[int, str] = {}
    for k in range(max(len(c) for c in cands.values())):
        todo = [op for op in cands if k < len(cands[op])]
        lines = [" ".join(f"{b:#04x}" for w in cands[op][k] for b in w.to_bytes(4, "little"))
                 for op in todo]
        for i, name in gen._disassemble(lines).items():
            if name != "v_illegal":
                chosen.setdefault(todo[i], []).append(cands[todo[i]][k])
                names.setdefault(todo[i], name)
    return chosen, names


def _machine() -> tuple[Machine, WaveSet]:
    rng = np.random.default_rng(1)
    m = Machine(MockMemory(), 1, 256, 1, 65536)
    m.V[:] = rng.integers(0, 2**32, m.V.shape, dtype=np.uint64).astype(np.uint32)
    m.S[:] = rng.integers(0, 64, m.S.shape).astype(np.uint32)  # small: M0, lane ids, offsets
    m.S[EXEC_LO] = 0xFFFFFFFF
    m.S[M0] = 0
    return m, WaveSet(m, ALL, 0)


def try_one(words: list[int]) -> str | None:
    """None when the instruction compiles and runs once, else the refusal's message."""
    # Two s_nop after the words, as for llvm-mc: the literal of v_fmaak and the like.
    code = b"".join(w.to_bytes(4, "little") for w in words) + bytes.fromhex("0000b0bf") * 3
    insts = decode_all(code, 0x1000, stop_at_code_end=False)
    prog = Program(0x1000, code, insts, [None] * len(insts),
                   {inst.addr: i for i, inst in enumerate(insts)}, set())
    _, g = _machine()
    try:
        step = prog.step(0)
        if step.fn is not None:
            with np.errstate(all="ignore"):
                step.fn(g)
    except (PageFaultError, PageFault):
        return None
    except KernelFault as e:
        # A fault the ISA defines (s_trap without a handler, s_sethalt) is the instruction's
        # behaviour; missing semantics and bad operand state are refusals.
        if str(e).startswith(("unsupported", "unknown", "bad state")) or "not modelled" in str(e):
            return str(e)
        return None
    except Exception as e:  # noqa: BLE001 - a crash is a refusal to report, not to hide
        return f"{type(e).__name__}: {e}"
    return None


ROWS = [enc for enc in TABLES] + [f"{enc}+{form}" for form in ("DPP16", "DPP8")
                                  for enc in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3P")]
MEMORY = ("DS", "FLAT", "SCRATCH", "GLOBAL", "MUBUF", "MTBUF", "MIMG")


def measure(enc: str) -> Row:
    """Acceptance of one report row."""
    chosen, names = valid_words(enc)
    row = Row(enc)
    base = enc.partition("+")[0]
    ops = TABLES[base] if "+" in enc else TABLES[enc]
    for op, name in ops.items():
        if "+" in enc and op not in chosen:
            continue  # this opcode has no DPP form
        row.total += 1
        forms = chosen.get(op)
        if forms is None and enc.startswith("VOPD"):
            # v_dual_dot2acc_f32_bf16 is in AMD's VOPD table but not in llvm-mc-16's.
            forms = candidates(enc)[op][:1]
            row.unchecked.append(name)
        if forms is None:
            row.undecodable.append(name)
            continue
        # Accepted when one of the forms LLVM decodes runs (operand constraints differ: a lane
        # select must be scalar, a permlane source a VGPR); else the first form's refusal.
        whys = []
        for words in forms:
            whys.append(try_one(words))
            if whys[-1] is None:
                break
        if whys[-1] is not None:
            row.refused[names.get(op, name)] = whys[0] or ""
    return row


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="list refused opcodes")
    ap.add_argument("rows", nargs="*", help=f"rows to measure (default all): {' '.join(ROWS)}")
    args = ap.parse_args(argv)
    if shutil.which(gen.LLVM_MC) is None:
        print(f"{gen.LLVM_MC} not found (Debian package llvm-16)", file=sys.stderr)
        return 2
    acc = tot = 0
    for enc in args.rows or ROWS:
        row = measure(enc)
        note = " (memory)" if enc in MEMORY else ""
        print(f"{enc:12s} {row.accepted:4d}/{row.total:<4d}{note}")
        if "+" not in enc and enc != "MIMG":
            acc, tot = acc + row.accepted, tot + row.total
        if args.verbose:
            for name in row.undecodable:
                print(f"    {name}: no candidate word llvm-mc decodes")
            for name in row.unchecked:
                print(f"    {name}: llvm-mc-16 decodes no form; tried the ISA's encoding")
            for name, why in sorted(row.refused.items()):
                print(f"    {name}: {why[:150]}")
    if not args.rows:
        print(f"{'all but MIMG':12s} {acc:4d}/{tot}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
