"""Scalar instructions of a one-wave group on numpy scalars.

A scalar op of one wave works on one value per operand. Run through [1]-shaped arrays it costs
a numpy call per step (~0.2-0.7 us each: the read, the op, the overflow or SCC test, the writes);
the same lane functions on numpy scalars read from and written to the wave's SGPR row
(`machine.Planes.s1`) cost ~20-50 ns a step. The general path stays the reference for groups of
several waves, wave64, 64-bit operands, EXEC as the destination, and SGPRs that hold a lane mask
a VALU op has not packed yet; tests run both on the same inputs.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .decode import EXEC_LO, NULL
from .machine import Group
from .operands import const_bits

Exec = Callable[[Group], None]
ScalarGetter = Callable[[np.ndarray], np.generic]
# fn(*sources[, scc]) -> (result or None, new SCC or None)
ScalarFn = Callable[..., tuple]


def scalar_source(code: int, inst_literal: int | None, t: str = "b32"
                  ) -> tuple[ScalarGetter, int | None] | None:
    """(getter of a 32-bit scalar source from the wave's SGPR row, the SGPR it reads or None),
    or None for a source the general path handles (SCC, EXECZ, VCCZ, ...)."""
    cb = 0 if code == NULL else const_bits(code, t, inst_literal)
    if cb is not None:
        c = np.uint32(cb)
        return (lambda S1: c), None
    if code < 128:
        return (lambda S1: S1[code]), code
    return None


def scalar_step(srcs: list[tuple[int, str]], literal: int | None, dst: int | None,
                fn: ScalarFn, slow: Exec, reads_scc: bool = False) -> Exec:
    """The step of a 32-bit scalar op: `fn` on the sources (and SCC when `reads_scc`) gives the
    result for SGPR `dst` (None: no result) and the new SCC (None: unchanged). `slow` runs it on
    groups the scalar path does not take."""
    got = [scalar_source(code, literal, t) for code, t in srcs]
    if any(x is None for x in got) or dst == EXEC_LO:
        return slow
    getters = [x[0] for x in got if x is not None]
    sregs = frozenset(x[1] for x in got if x is not None and x[1] is not None)
    write = dst is not None and dst != NULL

    def run(g: Group) -> None:
        P = g.planes
        if P is None or P.s1 is None or sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            return slow(g)
        S1, w = P.s1, P.w
        args = [r(S1) for r in getters]
        if reads_scc:
            args.append(P.scc[w])
        d, scc = fn(*args)
        if write and d is not None:
            S1[dst] = d
            g.m.dirty_s.add(dst)
            if g.dirty:
                g.dirty.discard(dst)
            g.lanes.pop(dst, None)   # an unpacked copy of the old value is stale
        if scc is not None:
            P.scc[w] = scc
    return run
