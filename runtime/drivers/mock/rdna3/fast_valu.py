# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="arg-type,index"
"""Fast paths of VALU instructions in their plain forms, for groups with a full EXEC.

A plain instruction (32-bit operands that are VGPRs, SGPRs or constants; no modifiers, no DPP)
on a group whose waves are a slice of a wave32 machine with every EXEC lane set (`Group.fast`)
needs no masked copy and no operand conversion: its step indexes the typed register planes
(`machine.Planes`), calls the same lane function as the general path and assigns the result
into the destination plane. With one wave that is 2-4 numpy calls instead of the ~15 the
general path's layered readers and writers make, which is most of a single-wave loop's time.
Any other group state (partial EXEC, waves picked by an index array, wave64, an SGPR source
holding a lane mask a VALU op has not packed yet) takes the general path, which stays the
reference semantics; tests run both on the same inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import dpp, fp
from .decode import NULL, VGPR0, Inst
from .machine import F32_PLANE, I32_PLANE, U32_PLANE, Group, Planes
from .operands import DTYPES, const_bits

Exec = Callable[[Group], None]
Getter = Callable[[Planes], np.ndarray]

PLANE = {"f32": F32_PLANE, "i32": I32_PLANE, "u32": U32_PLANE, "b32": U32_PLANE}
_MODIFIERS = ("abs", "neg", "omod", "clamp", "opsel")


def is_plain(inst: Inst) -> bool:
    """No source or output modifiers and no DPP: operands are read and written as they are."""
    f = inst.f
    return not any(f.get(k) for k in _MODIFIERS) and not dpp.is_dpp(inst)


def source(code: int, t: str, inst: Inst) -> tuple[Getter, int | None] | None:
    """(getter of a 32-bit source as type t from a group's planes, the SGPR it reads or None),
    or None for a source kind the fast path leaves to the general one (SCC, EXECZ, VCCZ, DPP,
    NULL)."""
    k = PLANE.get(t)
    if k is None:
        return None
    cb = const_bits(code, t, inst.literal)
    if cb is not None:
        c = np.array(cb, dtype=np.uint32).view(DTYPES[t])
        return (lambda P: c), None
    if code >= VGPR0:
        r = code - VGPR0
        return (lambda P: P.v[k][r]), None
    if code < 128 and code != NULL:
        return (lambda P: P.s[k][code, ...]), code
    return None


def plain(inst: Inst, srcs: tuple[str, ...], dst: str, fn: Callable[..., np.ndarray],
          slow: Exec) -> Exec:
    """The step of `vdst = fn(sources)` with a fast path; `slow` when the instruction or the
    group is not plain."""
    kd = PLANE.get(dst)
    got = [source(inst.f[f"src{i}"], t, inst) for i, t in enumerate(srcs)]
    if kd is None or not is_plain(inst) or any(x is None for x in got) or \
            inst.enc not in ("VOP1", "VOP2", "VOP3"):
        return slow
    getters = [x[0] for x in got if x is not None]
    # SGPRs read: one holding a lane mask a VALU op left unpacked (Group.dirty) needs the
    # general path, which packs it first.
    sregs = frozenset(x[1] for x in got if x is not None and x[1] is not None)
    d = inst.f["vdst"]
    if len(getters) == 1:
        g0, = getters

        def run1(g: Group) -> None:
            P = g.fast
            if P is None or sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                return slow(g)
            P.dirty_v.add(d)
            P.v[kd][d][...] = fn(g0(P))
        return run1
    if len(getters) == 2:
        g0, g1 = getters

        def run2(g: Group) -> None:
            P = g.fast
            if P is None or sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                return slow(g)
            P.dirty_v.add(d)
            P.v[kd][d][...] = fn(g0(P), g1(P))
        return run2

    def run(g: Group) -> None:
        P = g.fast
        if P is None or sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            return slow(g)
        P.dirty_v.add(d)
        P.v[kd][d][...] = fn(*[r(P) for r in getters])
    return run


def fmac_pow2(inst: Inst, k: np.ndarray, slow: Exec) -> Exec:
    """v_fmac_f32 vdst, k, src1 with k an inline power of two (fp.fma32_pow2), computed in the
    destination plane."""
    got = source(inst.f["src1"], "f32", inst)
    if got is None or inst.enc != "VOP2" or not is_plain(inst):
        return slow
    gx, sreg = got
    sregs = frozenset(() if sreg is None else (sreg,))
    d = inst.f["vdst"]

    def run(g: Group) -> None:
        P = g.fast
        if P is None or sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            return slow(g)
        P.dirty_v.add(d)
        D = P.v[F32_PLANE][d]
        fp.fma32_pow2(gx(P), k, D, out=D)
    return run


@dataclass(frozen=True)
class VopdHalf:
    """One half of a VOPD pair: operand type, lane function fn(s0, vs1, acc, literal), whether it
    reads its destination, and the register fields."""

    t: str
    fn: Callable[..., np.ndarray]
    reads_dst: bool
    vdst: int
    src0: int
    vsrc1: int


def vopd(inst: Inst, x: VopdHalf, y: VopdHalf, clash: bool, slow: Exec) -> Exec:
    """Both halves of a VOPD pair on the planes (sources read before either writes; `clash`: the
    Y result may alias X's destination, so it is copied before X is written)."""
    parts = []
    sregs: set[int] = set()
    for h in (x, y):
        a, b = source(h.src0, h.t, inst), source(h.vsrc1, h.t, inst)
        k = PLANE.get(h.t)
        if a is None or b is None or k is None:
            return slow
        sregs.update(r for r in (a[1], b[1]) if r is not None)
        lit = np.array(inst.literal or 0, dtype=np.uint32).view(DTYPES[h.t])
        parts.append((a[0], b[0], k, h.vdst, h.reads_dst, h.fn, lit))
    (ax, bx, kx, dx, accx, fx, lx), (ay, by, ky, dy, accy, fy, ly) = parts
    sr = frozenset(sregs)

    def run(g: Group) -> None:
        P = g.fast
        if P is None or sr and g.dirty and not sr.isdisjoint(g.dirty):
            return slow(g)
        rx = fx(ax(P), bx(P), P.v[kx][dx] if accx else None, lx)
        ry = fy(ay(P), by(P), P.v[ky][dy] if accy else None, ly)
        if clash:
            ry = np.array(ry)
        dv = P.dirty_v
        dv.add(dx)
        dv.add(dy)
        P.v[kx][dx][...] = rx
        P.v[ky][dy][...] = ry
    return run
