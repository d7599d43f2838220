"""Property: the mock NVIDIA GPU's SIMT execution of a kernel equals running every thread on its
own. Hypothesis writes random PTX kernels (integer arithmetic, compares, selects, forward branches
that diverge by thread and a loop whose trip count differs per thread) and the results of all
threads of a CTA are compared with a scalar reference that runs each thread alone."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.hcq import NVDevice

NREG = 5          # %r0..%r4 hold values; %r5 counts the loop; %r6 and %rd* address memory
THREADS = 64
M32 = 0xFFFFFFFF
ALU = ("add.u32", "sub.u32", "mul.lo.u32", "and.b32", "or.b32", "xor.b32", "min.u32",
       "max.u32", "min.s32", "max.s32", "shl.b32", "shr.u32", "shr.s32", "mul.hi.u32")
CMP = ("lt.u32", "eq.u32", "ne.u32", "ge.u32", "lt.s32", "gt.s32")


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _alu(op: str, a: int, b: int) -> int:
    if op in ("shl.b32", "shr.u32", "shr.s32"):
        if op == "shl.b32":
            return (a << b) & M32 if b < 32 else 0
        if op == "shr.u32":
            return a >> b if b < 32 else 0
        return (_s32(a) >> min(b, 31)) & M32
    return {
        "add.u32": lambda: (a + b) & M32, "sub.u32": lambda: (a - b) & M32,
        "mul.lo.u32": lambda: (a * b) & M32, "and.b32": lambda: a & b, "or.b32": lambda: a | b,
        "xor.b32": lambda: a ^ b, "min.u32": lambda: min(a, b), "max.u32": lambda: max(a, b),
        "min.s32": lambda: min(_s32(a), _s32(b)) & M32,
        "max.s32": lambda: max(_s32(a), _s32(b)) & M32,
        "mul.hi.u32": lambda: (a * b) >> 32,
    }[op]()


def _cmp(op: str, a: int, b: int) -> bool:
    kind, t = op.split(".")
    if t == "s32":
        a, b = _s32(a), _s32(b)
    return {"lt": a < b, "eq": a == b, "ne": a != b, "ge": a >= b, "gt": a > b}[kind]


@st.composite
def programs(draw: Any) -> list[tuple[Any, ...]]:
    """Instructions as tuples: ("alu", op, d, a, b_or_imm, is_imm), ("setp", op, p, a, b),
    ("selp", d, a, b, p), ("bra", p, negate, target_label), ("label", k), ("loop", body)."""
    n = draw(st.integers(3, 14))
    out: list[tuple[Any, ...]] = []
    labels = 0
    for _ in range(n):
        kind = draw(st.sampled_from(["alu", "alu", "alu", "setp", "selp", "bra", "loop"]))
        if kind == "alu":
            op = draw(st.sampled_from(ALU))
            imm = draw(st.booleans())
            b = draw(st.integers(0, 40)) if op.startswith("sh") else \
                (draw(st.integers(0, M32)) if imm else draw(st.integers(0, NREG - 1)))
            out.append(("alu", op, draw(st.integers(1, NREG - 1)), draw(st.integers(0, NREG - 1)),
                        b, imm or op.startswith("sh")))
        elif kind == "setp":
            out.append(("setp", draw(st.sampled_from(CMP)), draw(st.integers(0, 1)),
                        draw(st.integers(0, NREG - 1)), draw(st.integers(0, NREG - 1))))
        elif kind == "selp":
            out.append(("selp", draw(st.integers(1, NREG - 1)), draw(st.integers(0, NREG - 1)),
                        draw(st.integers(0, NREG - 1)), draw(st.integers(0, 1))))
        elif kind == "bra":
            out.append(("bra", draw(st.integers(0, 1)), draw(st.booleans()), labels))
            skip = draw(st.integers(0, 3))
            out.append(("later", labels, skip))
            labels += 1
        elif not any(i[0] == "loop" for i in out):
            body = [("alu", draw(st.sampled_from(ALU[:9])), draw(st.integers(1, NREG - 1)),
                     draw(st.integers(0, NREG - 1)), draw(st.integers(0, NREG - 1)), False)
                    for _ in range(draw(st.integers(1, 3)))]
            out.append(("loop", body))
    # place each forward label `skip` instructions after its branch (or at the end)
    prog: list[tuple[Any, ...]] = []
    pending: list[tuple[int, int]] = []
    for ins in out:
        if ins[0] == "later":
            pending.append((ins[1], ins[2]))
            continue
        prog.append(ins)
        for k, (lab, left) in enumerate(pending):
            pending[k] = (lab, left - 1)
        for lab, left in [p for p in pending if p[1] < 0]:
            prog.append(("label", lab))
        pending = [p for p in pending if p[1] >= 0]
    prog += [("label", lab) for lab, _ in pending]
    return prog


def _ptx(prog: list[tuple[Any, ...]]) -> bytes:
    lines = [".version 8.0", ".target sm_90", ".address_size 64",
             ".visible .entry rnd(.param .u64 pin, .param .u64 pout)", "{",
             "  .reg .pred %p<3>;", "  .reg .b32 %r<8>;", "  .reg .b64 %rd<6>;",
             "  ld.param.u64 %rd1, [pin];", "  ld.param.u64 %rd2, [pout];",
             "  mov.u32 %r0, %tid.x;", "  mul.wide.u32 %rd3, %r0, 4;",
             "  add.s64 %rd4, %rd1, %rd3;",
             "  ld.global.u32 %r1, [%rd4];", "  mov.u32 %r2, 7;", "  xor.b32 %r3, %r1, %r0;",
             "  mov.u32 %r4, 0;", "  setp.lt.u32 %p0, %r0, 32;", "  setp.eq.u32 %p1, %r1, %r0;"]
    for ins in prog:
        k = ins[0]
        if k == "alu":
            _, op, d, a, b, imm = ins
            lines.append(f"  {op} %r{d}, %r{a}, {b if imm else f'%r{b}'};")
        elif k == "setp":
            _, op, p, a, b = ins
            lines.append(f"  setp.{op} %p{p}, %r{a}, %r{b};")
        elif k == "selp":
            _, d, a, b, p = ins
            lines.append(f"  selp.b32 %r{d}, %r{a}, %r{b}, %p{p};")
        elif k == "bra":
            _, p, neg, lab = ins
            lines.append(f"  @{'!' if neg else ''}%p{p} bra L{lab};")
        elif k == "label":
            lines.append(f"L{ins[1]}:")
        elif k == "loop":
            lines += ["  and.b32 %r5, %r1, 3;", "  add.u32 %r5, %r5, 1;", "LOOP:"]
            for _, op, d, a, b, _imm in ins[1]:
                lines.append(f"  {op} %r{d}, %r{a}, %r{b};")
            lines += ["  sub.u32 %r5, %r5, 1;", "  setp.ne.u32 %p2, %r5, 0;", "  @%p2 bra LOOP;"]
    lines += ["  mul.wide.u32 %rd3, %r0, 20;", "  add.s64 %rd5, %rd2, %rd3;"]
    lines += [f"  st.global.u32 [%rd5+{4 * i}], %r{i};" for i in range(NREG)]
    lines += ["  ret;", "}"]
    return ("\n".join(lines) + "\n").encode()


def _reference(prog: list[tuple[Any, ...]], tid: int, x: int) -> list[int]:
    r = [tid, x, 7, x ^ tid, 0]
    p = [tid < 32, x == tid]
    flat = list(prog)
    pc = 0
    while pc < len(flat):
        ins = flat[pc]
        pc += 1
        k = ins[0]
        if k == "alu":
            _, op, d, a, b, imm = ins
            r[d] = _alu(op, r[a], b if imm else r[b])
        elif k == "setp":
            _, op, q, a, b = ins
            p[q] = _cmp(op, r[a], r[b])
        elif k == "selp":
            _, d, a, b, q = ins
            r[d] = r[a] if p[q] else r[b]
        elif k == "bra":
            _, q, neg, lab = ins
            if p[q] != neg:
                pc = flat.index(("label", lab)) + 1
        elif k == "loop":
            for _ in range((r[1] & 3) + 1):  # the count is taken from %r1 on entry
                for _, op, d, a, b, _imm in ins[1]:
                    r[d] = _alu(op, r[a], r[b])
    return r


@pytest.fixture(scope="module")
def dev() -> Iterator[NVDevice]:
    d = NVDevice("mock-nv:0")
    d.default_timeout_ms = 20_000.0
    yield d
    d.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_simt_execution_equals_each_thread_alone(dev: NVDevice, prog: list[tuple[Any, ...]],
                                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, THREADS, dtype=np.uint64).astype(np.uint32)
    x[::5] = np.arange(0, THREADS, 5)          # some threads take the %p1 path
    X, O = dev.alloc(4 * THREADS), dev.alloc(4 * NREG * THREADS)
    dev.copyin(X, x)
    prg = dev.program(_ptx(prog), "rnd")
    prg(X, O, global_size=(1, 1, 1), local_size=(THREADS, 1, 1), wait=True)
    got = np.zeros(NREG * THREADS, np.uint32)
    dev.copyout(got, O)
    want = [_reference(prog, t, int(x[t])) for t in range(THREADS)]
    assert got.reshape(THREADS, NREG).tolist() == want, _ptx(prog).decode()
    prg.free()
    dev.free(X)
    dev.free(O)
