"""Scalar instructions of a wave set of one wave, on numpy scalars.

A scalar op of one wave works on one value per operand. Run through [1]-shaped arrays it costs
a numpy call per step (the read, the op, the overflow or SCC test, the writes), each far dearer
than the work; the same lane functions on numpy scalars read from and written to the wave's SGPR
row (`machine.Planes.s1`) cost an order of magnitude less (a lane mask a VALU op left
unpacked is packed into its SGPR first; a result for EXEC goes through WaveSet.set_s, which
unpacks the new lanes). The general path stays the reference for wave sets of several waves,
wave64 and 64-bit operands; tests run both on the same inputs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .decode import EXEC_LO, NULL
from . import fast_valu
from .machine import Planes, WaveSet
from .operands import const_bits

Exec = Callable[[WaveSet], None]
# fn(*sources[, scc]) -> (result or None, new SCC or None)
ScalarFn = Callable[..., tuple]
SGPR, CONST = True, False


def scalar_source(code: int, literal: int | None, t: str = "b32") -> tuple[bool, Any] | None:
    """(SGPR, its number) or (CONST, a numpy uint32) for a 32-bit scalar source, or None for a
    source the general path handles (SCC, EXECZ, VCCZ, ...)."""
    cb = 0 if code == NULL else const_bits(code, t, literal)
    if cb is not None:
        return CONST, np.uint32(cb)
    if code < 128:
        return SGPR, code
    return None


M32 = 0xFFFFFFFF


def _si(x: int) -> int:
    """The signed value of a 32-bit pattern."""
    return x - 0x100000000 if x & 0x80000000 else x


# Each op is one function (a call per step; nested helpers would double it).
def add_i32(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = (a + b) & M32
    return d, ((a ^ d) & (b ^ d)) >= 0x80000000   # signed overflow: the sign bit of the test


def _sub_i32(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = (a - b) & M32
    return d, ((a ^ b) & (a ^ d)) >= 0x80000000


def _add_u32(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    t = a + b
    return t & M32, t > M32


def _addc_u32(a: int, b: int, s: bool) -> tuple[int, bool]:
    t = a + b + s
    return t & M32, t > M32


def _and(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = a & b
    return d, d != 0


def _or(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = a | b
    return d, d != 0


def _xor(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = a ^ b
    return d, d != 0


def _and_not1(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = a & ~b & M32
    return d, d != 0


def _lshl(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = (a << (b & 31)) & M32
    return d, d != 0


def _lshr(a: int, b: int, s: bool = False) -> tuple[int, bool]:
    d = a >> (b & 31)
    return d, d != 0


def _nz(d: int) -> tuple[int, bool]:
    return d, d != 0


def _lshl_add(n: int) -> ScalarFn:
    def run(a: int, b: int, s: bool = False) -> tuple[int, bool]:
        t = (a << n) + b
        return t & M32, t > M32
    return run


# SOP2 ops on Python ints (32-bit patterns): (a, b, scc) -> (result, new SCC or None), the same
# results as ops_salu's numpy lane functions (tests compare the two on edge values). Python
# integer arithmetic costs tens of nanoseconds where a numpy scalar operation costs hundreds.
INT_SOP2: dict[str, ScalarFn] = {
    "s_add_u32": _add_u32,
    "s_sub_u32": lambda a, b, s=False: ((a - b) & M32, b > a),
    "s_addc_u32": _addc_u32,
    "s_subb_u32": lambda a, b, s: ((a - b - s) & M32, b + s > a),
    "s_add_i32": add_i32,
    "s_sub_i32": _sub_i32,
    "s_and_b32": _and,
    "s_or_b32": _or,
    "s_xor_b32": _xor,
    "s_nand_b32": lambda a, b, s=False: _nz(~(a & b) & M32),
    "s_nor_b32": lambda a, b, s=False: _nz(~(a | b) & M32),
    "s_xnor_b32": lambda a, b, s=False: _nz(~(a ^ b) & M32),
    "s_and_not1_b32": _and_not1,
    "s_or_not1_b32": lambda a, b, s=False: _nz((a | ~b) & M32),
    "s_lshl_b32": _lshl,
    "s_lshr_b32": _lshr,
    "s_ashr_i32": lambda a, b, s=False: _nz((_si(a) >> (b & 31)) & M32),
    "s_min_u32": lambda a, b, s=False: (min(a, b), a < b),
    "s_max_u32": lambda a, b, s=False: (max(a, b), a > b),
    "s_min_i32": lambda a, b, s=False: (a, True) if _si(a) < _si(b) else (b, False),
    "s_max_i32": lambda a, b, s=False: (a, True) if _si(a) > _si(b) else (b, False),
    "s_mul_i32": lambda a, b, s=False: ((a * b) & M32, None),
    "s_cselect_b32": lambda a, b, s: (a if s else b, None),
    "s_lshl1_add_u32": _lshl_add(1),
    "s_lshl2_add_u32": _lshl_add(2),
    "s_lshl3_add_u32": _lshl_add(3),
    "s_lshl4_add_u32": _lshl_add(4),
}
# The SOP2 ops whose result depends on SCC (the others are called without it)
SOP2_READS_SCC = frozenset({"s_addc_u32", "s_subb_u32", "s_cselect_b32"})

# SOP1 ops on Python ints: a -> (result, new SCC or None)
INT_SOP1: dict[str, ScalarFn] = {
    "s_mov_b32": lambda a: (a, None),
    "s_not_b32": lambda a: _nz(~a & M32),
}


def scalar_step(srcs: list[tuple[int, str]], literal: int | None, dst: int | None,
                fn: ScalarFn, slow: Exec, reads_scc: bool = False,
                int_fn: ScalarFn | None = None, int_reads_scc: bool | None = None) -> Exec:
    """The step of a 32-bit scalar op with at most two sources: `fn` on the sources (then SCC
    when `reads_scc`) gives the result for SGPR `dst` (None: no result) and the new SCC (None:
    unchanged). `slow` runs it on wave sets the scalar path does not take. `int_fn`, where
    given, is the same op on Python ints (32-bit patterns; SCC a bool), used instead of `fn`;
    it is passed SCC where `int_reads_scc` says (default: as `fn`)."""
    got = [scalar_source(code, literal, t) for code, t in srcs]
    if len(got) > 2 or any(x is None for x in got):
        return slow
    ops = [x for x in got if x is not None]
    sregs = frozenset(v for is_reg, v in ops if is_reg)
    n_src = len(ops)
    out = NULL if dst is None else dst
    if int_fn is not None:
        return _int_step([(r, v if r else int(v)) for r, v in ops], sregs, out, int_fn, slow,
                         reads_scc if int_reads_scc is None else int_reads_scc)
    (r0, v0), (r1, v1) = (ops + [(CONST, None)] * 2)[:2]

    def run(g: WaveSet) -> None:
        P = g.planes
        if P is None or P.s1 is None:
            return slow(g)
        if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            for r in sregs.intersection(g.dirty):
                g.s(r)   # a lane mask a VALU op left unpacked: pack it into its SGPR first
        S1, w = P.s1, P.w
        a = S1[v0] if r0 else v0
        if n_src == 2:
            b = S1[v1] if r1 else v1
            d, scc = fn(a, b, P.scc[w]) if reads_scc else fn(a, b)
        elif n_src == 1:
            d, scc = fn(a, P.scc[w]) if reads_scc else fn(a)
        else:
            d, scc = fn(P.scc[w]) if reads_scc else fn()
        if d is not None:
            write_sgpr(g, S1, out, d)
        if scc is not None:
            P.scc[w] = scc
    return run


def _int_step(ops: list[tuple[bool, Any]], sregs: frozenset[int], out: int, fn: ScalarFn,
              slow: Exec, reads_scc: bool) -> Exec:
    """scalar_step's run on Python ints: SGPRs read with .item, constants already ints."""
    (r0, v0), (r1, v1) = (ops + [(CONST, None)] * 2)[:2]
    n_src = len(ops)
    plain_dst = out not in (EXEC_LO, NULL)   # written in place (write_sgpr's last case)

    def run(g: WaveSet) -> None:
        P = g.planes
        if P is None or P.s1 is None:
            return slow(g)
        if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            for r in sregs.intersection(g.dirty):
                g.s(r)   # a lane mask a VALU op left unpacked: pack it into its SGPR first
        S1, w = P.s1, P.w
        a = S1.item(v0) if r0 else v0
        if n_src == 2:
            b = S1.item(v1) if r1 else v1
            d, scc = fn(a, b, P.scc.item(w)) if reads_scc else fn(a, b)
        elif n_src == 1:
            d, scc = fn(a, P.scc.item(w)) if reads_scc else fn(a)
        else:
            d, scc = fn(P.scc.item(w)) if reads_scc else fn()
        if d is not None:
            if plain_dst:
                S1[out] = d
                g.m.dirty_s.add(out)
                if g.dirty:
                    g.dirty.discard(out)
                g.lanes.pop(out, None)   # an unpacked copy of the old value is stale
            else:
                write_sgpr(g, S1, out, d)
        if scc is not None:
            P.scc[w] = scc
    if plain_dst or out == NULL:
        fast_valu.bindable(run, lambda g, P: _bind_int(g, P, r0, v0, r1, v1, n_src, out, fn,
                                                       reads_scc))
    return run


def _bind_int(g: WaveSet, P: Planes, r0: bool, v0: Any, r1: bool, v1: Any, n_src: int,
              out: int, fn: ScalarFn, reads_scc: bool) -> fast_valu.Bound | None:
    """_int_step's run bound to one wave: its SGPR row, SCC and unpacked-mask cache looked up
    once (the scheduler runs it only while no SGPR holds an unpacked lane mask, so nothing
    needs packing first)."""
    S1, w, SCC = P.s1, P.w, P.scc
    if S1 is None:
        return None
    lanes, dirty_s = g.lanes, g.m.dirty_s
    write = out != NULL
    if n_src == 2 and not reads_scc and S1.ndim == 1 and S1.dtype == np.uint32 and \
            SCC.dtype == np.bool_:
        # the usual shapes, each its own function (a test per step costs about what the
        # step's own work does), with the methods they call looked up here; the SGPR row and
        # SCC read and written through memoryviews (several times cheaper per element than
        # numpy's item and item assignment; the values are Python ints and bools)
        mark, forget = dirty_s.add, lanes.pop
        sv, cv = S1.data, SCC.data   # (memoryviews, strided where the row is)
        item = sv.__getitem__
        compare = getattr(fn, "compare", None)   # (operator, sign flip) of a SOPC compare
        if compare is not None and not write and r0:
            # a compare's operator inline (no call of fn: a Python call costs about what the
            # rest of the step does)
            op, flip = compare
            if not r1:
                k = v1 ^ flip

                def cmp_rc_inline() -> None:
                    cv[w] = op(item(v0) ^ flip, k)
                return cmp_rc_inline, (), ()

            def cmp_rr_inline() -> None:
                cv[w] = op(item(v0) ^ flip, item(v1) ^ flip)
            return cmp_rr_inline, (), ()
        if fn is add_i32 and write and r0 and not r1:
            # the loop counter's add, inline (add_i32's arithmetic)
            def add_rc() -> None:
                a = item(v0)
                d = (a + v1) & M32
                sv[out] = d
                mark(out)
                forget(out, None)   # an unpacked copy of the old value is stale
                cv[w] = ((a ^ d) & (v1 ^ d)) >= 0x80000000
            return add_rc, (), ()
        if r0 and not r1:
            if write:
                def run_rc() -> None:
                    d, scc = fn(item(v0), v1)
                    if d is not None:
                        sv[out] = d
                        mark(out)
                        forget(out, None)   # an unpacked copy of the old value is stale
                    if scc is not None:
                        cv[w] = scc
                return run_rc, (), ()

            def cmp_rc() -> None:
                scc = fn(item(v0), v1)[1]
                if scc is not None:
                    cv[w] = scc
            return cmp_rc, (), ()
        if r0 and r1:
            if write:
                def run_rr() -> None:
                    d, scc = fn(item(v0), item(v1))
                    if d is not None:
                        sv[out] = d
                        mark(out)
                        forget(out, None)
                    if scc is not None:
                        cv[w] = scc
                return run_rr, (), ()

            def cmp_rr() -> None:
                scc = fn(item(v0), item(v1))[1]
                if scc is not None:
                    cv[w] = scc
            return cmp_rr, (), ()

    def run() -> None:
        a = S1.item(v0) if r0 else v0
        if n_src == 2:
            b = S1.item(v1) if r1 else v1
            d, scc = fn(a, b, SCC.item(w)) if reads_scc else fn(a, b)
        elif n_src == 1:
            d, scc = fn(a, SCC.item(w)) if reads_scc else fn(a)
        else:
            d, scc = fn(SCC.item(w)) if reads_scc else fn()
        if d is not None and write:
            S1[out] = d
            dirty_s.add(out)
            lanes.pop(out, None)   # an unpacked copy of the old value is stale
        if scc is not None:
            SCC[w] = scc
    return run, (), ()


def write_sgpr(g: WaveSet, S1: np.ndarray, r: int, d: np.generic | int) -> None:
    """WaveSet.set_s for one wave's row: NULL drops the value, EXEC goes through set_s (the
    wave set's unpacked lanes follow), any other SGPR is written in place."""
    if r == EXEC_LO:
        g.set_s(r, d)
    elif r != NULL:
        S1[r] = d
        g.m.dirty_s.add(r)
        if g.dirty:
            g.dirty.discard(r)
        g.lanes.pop(r, None)   # an unpacked copy of the old value is stale


def saveexec_step(src: int, literal: int | None, dst: int, op: Callable[..., np.generic],
                  wrexec: bool, slow: Exec) -> Exec:
    """s_<op>_saveexec_b32 / _wrexec_b32 of one wave: EXEC = op(S0, EXEC), then dst = the old
    EXEC (the new one for wrexec), SCC = new EXEC != 0."""
    got = scalar_source(src, literal)
    if got is None or dst == EXEC_LO:
        return slow
    is_reg, v = got
    sregs = frozenset((v, EXEC_LO) if is_reg else (EXEC_LO,))

    def run(g: WaveSet) -> None:
        P = g.planes
        if P is None or P.s1 is None:
            return slow(g)
        if g.dirty and not sregs.isdisjoint(g.dirty):
            for r in sregs.intersection(g.dirty):
                g.s(r)
        S1 = P.s1
        old = S1[EXEC_LO]
        new = op(S1[v] if is_reg else v, old)
        g.set_s(EXEC_LO, new)
        write_sgpr(g, S1, dst, new if wrexec else old)
        P.scc[P.w] = new != 0
    return run
