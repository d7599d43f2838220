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
from .machine import WaveSet
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


def scalar_step(srcs: list[tuple[int, str]], literal: int | None, dst: int | None,
                fn: ScalarFn, slow: Exec, reads_scc: bool = False) -> Exec:
    """The step of a 32-bit scalar op with at most two sources: `fn` on the sources (then SCC
    when `reads_scc`) gives the result for SGPR `dst` (None: no result) and the new SCC (None:
    unchanged). `slow` runs it on wave sets the scalar path does not take."""
    got = [scalar_source(code, literal, t) for code, t in srcs]
    if len(got) > 2 or any(x is None for x in got):
        return slow
    ops = [x for x in got if x is not None]
    sregs = frozenset(v for is_reg, v in ops if is_reg)
    (r0, v0), (r1, v1) = (ops + [(CONST, None)] * 2)[:2]
    n_src = len(ops)
    out = NULL if dst is None else dst

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


def write_sgpr(g: WaveSet, S1: np.ndarray, r: int, d: np.generic) -> None:
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
