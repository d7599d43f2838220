# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="arg-type,index,operator"
"""Fast paths of VALU instructions in their plain forms, for wave sets whose waves are a slice.

A plain instruction (32-bit operands that are VGPRs, SGPRs or constants; no modifiers, no DPP)
on a wave set whose waves are a slice of a wave32 machine needs no operand conversion: its step
indexes the typed register planes (`machine.Planes`), calls the same lane function as the
general path and, with every EXEC lane set (`WaveSet.fast`), assigns the result into the
destination plane (a ufunc computes straight into it); with EXEC partly set it copies the
result into the EXEC lanes. With one wave that is 2-4 numpy calls instead of the ~15 the general
path's layered readers and writers make, which is most of a single-wave loop's time. An SGPR
source holding a lane mask a VALU op has not packed yet is packed first. Other wave sets (waves
picked by an index array, wave64) take the general path, which stays the reference semantics;
tests run both on the same inputs.

An operand is a pair (plane, index): `regs[plane][index]` of the wave set's planes, or for plane
CONST the constant itself (index). Steps index inline rather than through per-operand getter
functions: a Python call per operand costs about as much as the numpy work of a one-wave op.
"""
from __future__ import annotations

import operator
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import dpp, fp
from .decode import NULL, VGPR0, Inst
from .machine import F32_PLANE, I32_PLANE, SGPR_PLANES, U32_PLANE, Planes, WaveSet
from .operands import DTYPES, const_bits
from .valu_table import Convert

Exec = Callable[[WaveSet], None]
Operand = tuple[int, Any]

CONST = -1
PLANE = {"f32": F32_PLANE, "i32": I32_PLANE, "u32": U32_PLANE, "b32": U32_PLANE}
_MODIFIERS = ("abs", "neg", "omod", "clamp", "opsel")


# A step bound to one wave set's planes: fn(*args) does the step's work while EXEC has every
# lane set and no SGPR holds an unpacked lane mask; the VGPRs it writes. A binder may answer
# None (the step then runs as it is). A bound fn that only makes calls of its own may list them
# as its `parts` attribute, ((fn, args), ...): a runner may call those instead.
Bound = tuple[Callable[..., Any], tuple[Any, ...], tuple[int, ...]]
Binder = Callable[[WaveSet, Planes], "Bound | None"]
# The binders of the steps below that reduce to one call (a droppable cache: a step without one
# just runs as it is). The scheduler binds straight-line runs of them once per wave set, so a
# one-wave loop's plain VALU op is one numpy call without the step's look-ups.
_BINDERS: "weakref.WeakKeyDictionary[Callable[..., Any], Binder]" = weakref.WeakKeyDictionary()


def binder(step_fn: Callable[..., Any]) -> Binder | None:
    """How to bind a step function to a wave set's planes, if it can be."""
    return _BINDERS.get(step_fn)


def bindable(step_fn: Callable[..., Any], bind: Binder) -> None:
    """Records how `step_fn` binds (see Bound)."""
    _BINDERS[step_fn] = bind


def _operand_of(A: Any, k: int, i: Any) -> Any:
    return A[k, i] if k >= 0 else i


def is_plain(inst: Inst) -> bool:
    """No source or output modifiers and no DPP: operands are read and written as they are."""
    f = inst.f
    return not any(f.get(k) for k in _MODIFIERS) and not dpp.is_dpp(inst)


def operand(code: int, t: str, inst: Inst) -> Operand | None:
    """Where a 32-bit source of type t is, or None for a kind the fast path leaves to the
    general one (SCC, EXECZ, VCCZ, DPP, NULL, 16/64-bit types)."""
    k = PLANE.get(t)
    if k is None:
        return None
    cb = const_bits(code, t, inst.literal)
    if cb is not None:
        return CONST, np.array(cb, dtype=np.uint32).view(DTYPES[t])
    if code >= VGPR0:
        return k, code - VGPR0
    if code < 128 and code != NULL:
        return SGPR_PLANES + k, (code, Ellipsis)
    return None


def sgprs_read(ops: list[Operand]) -> frozenset[int]:
    """SGPRs among the operands: one holding a lane mask a VALU op left unpacked (WaveSet.dirty)
    is packed before it is read (pack_lane_masks)."""
    return frozenset(i[0] for k, i in ops if k >= SGPR_PLANES)


def pack_lane_masks(g: WaveSet, sregs: frozenset[int]) -> None:
    """Packs the lane masks among `sregs` that a VALU op left unpacked into their SGPRs (what
    reading them through WaveSet.s does), so the planes hold their bits."""
    for r in sregs.intersection(g.dirty):
        g.s(r)


def partial_exec(ops: list[Operand], dests: list[tuple[int, int]],
                 compute: Callable[..., tuple[np.ndarray, ...]], slow: Exec) -> Exec:
    """The step for a wave set with planes whose EXEC is partly set: `compute(*operands)` gives one
    result per destination (plane, VGPR), each copied into its register's EXEC lanes (what
    WaveSet.set_v does, without the layered readers)."""
    sregs = sgprs_read(ops)

    def run(g: WaveSet) -> None:
        P = g.planes
        if P is None:
            return slow(g)
        if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            pack_lane_masks(g, sregs)
        A = P.views
        res = compute(*[A[k, i] if k >= 0 else i for k, i in ops])
        ex = g.exec
        for (k, r), v in zip(dests, res):
            P.dirty_v.add(r)
            np.copyto(A[k, r], v, where=ex, casting="unsafe")
    return run


# VALU shifts (the amount is src0) that reduce to one ufunc when the amount is a constant
_CONST_SHIFTS = {"v_lshlrev_b32": np.left_shift, "v_lshrrev_b32": np.right_shift,
                 "v_ashrrev_i32": np.right_shift}


def _mul_hi_into(wide: type) -> Callable[..., None]:
    amount: np.ndarray = np.array(32, dtype=wide)
    as_is = wide is np.int64   # (the scratch register's own type: no view needed)

    def run(a: np.ndarray, b: np.ndarray, out: np.ndarray, wide_tmp: np.ndarray) -> None:
        # exact: a 32 x 32-bit product fits 64 bits; computed in the wave set's 64-bit scratch
        # register (one operand widened there, the other by the ufunc: a constant comes
        # widened already where the step is bound, so the ufunc's types match)
        t: np.ndarray = wide_tmp if as_is else wide_tmp.view(wide)
        t[...] = a
        np.multiply(t, b, t)
        np.right_shift(t, amount, t)
        out[...] = t
    return run


_WIDE = {"v_mul_hi_i32": np.int64, "v_mul_hi_u32": np.uint64}


def _add3_into(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray,
               wide_tmp: np.ndarray) -> None:
    np.add(a, b, out=out)
    np.add(out, c, out=out)


# Integer ops of several numpy steps written straight into the destination register (the same
# lane functions as valu_table's, without temporaries): name -> (sources,
# fn(*sources, out, the wave set's 64-bit scratch register)).
_INTO: dict[str, tuple[int, Callable[..., None]]] = {
    "v_mul_hi_i32": (2, _mul_hi_into(np.int64)), "v_mul_hi_u32": (2, _mul_hi_into(np.uint64)),
    "v_add3_u32": (3, _add3_into)}


def plain(inst: Inst, srcs: tuple[str, ...], dst: str, fn: Callable[..., np.ndarray],
          slow: Exec) -> Exec:
    """The step of `vdst = fn(sources)` with a fast path; `slow` when the instruction or the
    wave set is not plain."""
    kd = PLANE.get(dst)
    got = [operand(inst.f[f"src{i}"], t, inst) for i, t in enumerate(srcs)]
    if kd is None or not is_plain(inst) or inst.enc not in ("VOP1", "VOP2", "VOP3") or \
            not 1 <= len(got) <= 3:
        return slow
    ops = [x for x in got if x is not None]
    if len(ops) != len(got):
        return slow
    sregs = sgprs_read(ops)
    d = inst.f["vdst"]
    (k0, i0), (k1, i1), (k2, i2) = (ops + [(CONST, None)] * 2)[:3]
    partial = partial_exec(ops, [(kd, d)], lambda *a: (fn(*a),), slow)
    shift = _CONST_SHIFTS.get(inst.name)
    if shift is not None and k0 == CONST and k1 == kd:
        # A shift by a constant: the amount masked once here, one ufunc into the destination.
        amount = np.array(int(np.asarray(i0).view(np.uint32)) & 31).astype(DTYPES[dst])

        def run_shift(g: WaveSet) -> None:
            P = g.fast
            if P is None:
                return partial(g)
            if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                pack_lane_masks(g, sregs)
            A = P.views
            P.dirty_v.add(d)
            shift(A[k1, i1], amount, out=A[kd, d])
        _BINDERS[run_shift] = lambda g, P: (shift, (P.views[k1, i1], amount, P.views[kd, d]),
                                         (d,))
        return run_shift
    into = _INTO.get(inst.name)
    if into is not None and len(ops) == into[0] and all(PLANE[t] == kd for t in srcs) and \
            not (len(ops) == 3 and k2 == kd and i2 == d):
        # Computed into the destination (its third source, which the first step would
        # overwrite, is not the destination).
        compute_into = into[1]
        n_ops = into[0]

        def run_into(g: WaveSet) -> None:
            P = g.fast
            if P is None:
                return partial(g)
            if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                pack_lane_masks(g, sregs)
            A = P.views
            P.dirty_v.add(d)
            if n_ops == 2:
                compute_into(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1,
                             A[kd, d], P.tmp64)
            else:
                compute_into(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1,
                             A[k2, i2] if k2 >= 0 else i2, A[kd, d], P.tmp64)

        wide = _WIDE.get(inst.name)

        def bind_into(g: WaveSet, P: Planes) -> Bound:
            A = P.views
            srcs_now = [_operand_of(A, k, i) if k >= 0 or wide is None else
                        np.asarray(i).astype(wide) for k, i in ops]
            return compute_into, (*srcs_now, A[kd, d], P.tmp64), (d,)
        _BINDERS[run_into] = bind_into
        return run_into
    if len(ops) == 1 and isinstance(fn, Convert) and fn.dtype is DTYPES[dst]:
        # A plain cast: assigning into the destination plane casts the same way.
        def run1_cast(g: WaveSet) -> None:
            P = g.planes
            if P is None:
                return slow(g)
            if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                pack_lane_masks(g, sregs)
            A = P.views
            P.dirty_v.add(d)
            if g.exec_full:
                A[kd, d][...] = A[k0, i0] if k0 >= 0 else i0
            else:   # EXEC partly set: the EXEC lanes only
                np.copyto(A[kd, d], A[k0, i0] if k0 >= 0 else i0, where=g.exec,
                          casting="unsafe")
        # (the assignment above, as a C call: no Python frame)
        _BINDERS[run1_cast] = lambda g, P: (
            operator.setitem, (P.views[kd, d], Ellipsis, _operand_of(P.views, k0, i0)), (d,))
        return run1_cast
    if len(ops) == 1:
        def run1(g: WaveSet) -> None:
            P = g.fast
            if P is None:
                return partial(g)
            if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                pack_lane_masks(g, sregs)
            A = P.views
            P.dirty_v.add(d)
            A[kd, d][...] = fn(A[k0, i0] if k0 >= 0 else i0)
        return run1
    if len(ops) == 2 and isinstance(fn, np.ufunc) and fn.nout == 1 and \
            all(PLANE[t] == kd for t in srcs):
        # A ufunc whose operands and result share a type: computed into the register itself.
        def run2_into(g: WaveSet) -> None:
            P = g.planes
            if P is None:
                return slow(g)
            if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                pack_lane_masks(g, sregs)
            A = P.views
            P.dirty_v.add(d)
            if g.exec_full:
                fn(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1, out=A[kd, d])
            else:   # EXEC partly set: computed in the scratch register, copied to the EXEC
                # lanes (cheaper on a wave's 32 lanes than the ufunc's where=)
                T = P.tmps[kd]
                fn(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1, out=T)
                np.copyto(A[kd, d], T, where=g.exec)
        # (a ufunc's third positional argument is its output)
        _BINDERS[run2_into] = lambda g, P: (
            fn, (_operand_of(P.views, k0, i0), _operand_of(P.views, k1, i1), P.views[kd, d]),
            (d,))
        return run2_into
    if len(ops) == 2:
        def run2(g: WaveSet) -> None:
            P = g.fast
            if P is None:
                return partial(g)
            if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                pack_lane_masks(g, sregs)
            A = P.views
            P.dirty_v.add(d)
            A[kd, d][...] = fn(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1)
        return run2

    def run3(g: WaveSet) -> None:
        P = g.fast
        if P is None:
            return partial(g)
        if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            pack_lane_masks(g, sregs)
        A = P.views
        P.dirty_v.add(d)
        A[kd, d][...] = fn(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1,
                           A[k2, i2] if k2 >= 0 else i2)
    return run3


def fmac_pow2(inst: Inst, k: np.ndarray, slow: Exec) -> Exec:
    """v_fmac_f32 vdst, k, src1 with k an inline power of two, computed in the destination
    plane: fp.fma32_pow2, with its exactness test for k = ±0.5 done here on the u32 plane."""
    xf = operand(inst.f["src1"], "f32", inst)
    xu = operand(inst.f["src1"], "u32", inst)
    if xf is None or xu is None or inst.enc != "VOP2" or not is_plain(inst):
        return slow
    sregs = sgprs_read([xf])
    d = inst.f["vdst"]
    (kf, i_f), (ku, iu) = xf, xu
    half = abs(float(k)) == 0.5
    partial = partial_exec([xf, (F32_PLANE, d)], [(F32_PLANE, d)],
                           lambda x, acc: (fp.fma32_pow2(x, k, acc),), slow)

    def run(g: WaveSet) -> None:
        P = g.fast
        if P is None:
            return partial(g)
        if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            pack_lane_masks(g, sregs)
        A = P.views
        P.dirty_v.add(d)
        D = A[F32_PLANE, d]
        x = A[kf, i_f] if kf >= 0 else i_f
        if half:
            # x * 0.5 exact in every lane: one f32 rounding of the sum is the fused result.
            # (The usual case, every exponent >= 2, is tested in the scratch register; the
            # product goes there too.)
            bits = A[ku, iu] if ku >= 0 else iu
            if fp.exponents_above_1(bits, P.tmp) or fp.halves_exactly(bits):
                np.multiply(x, k, out=P.tmp_f)
                np.add(P.tmp_f, D, out=D)
                return
        fp.fma32_pow2(x, k, D, out=D)

    def bind(g: WaveSet, P: Planes) -> Bound:
        # the same computation on views looked up once
        A = P.views
        D, T, TF = A[F32_PLANE, d], P.tmp, P.tmp_f
        x = A[kf, i_f] if kf >= 0 else i_f
        bits = A[ku, iu] if ku >= 0 else iu

        if half and D.size == 32 and fp.LITTLE:
            # one wave: fp.exponents_above_1's test on the register's top bytes inline (a
            # Python call costs about what the test does), numpy called with positional outputs
            multiply, add, tobytes = np.multiply, np.add, bits.tobytes

            def run_bound_wave() -> None:
                top = tobytes()[3::4]
                if 0 not in top and 0x80 not in top or fp.halves_exactly(bits):
                    multiply(x, k, TF)
                    add(TF, D, D)
                    return
                fp.fma32_pow2(x, k, D, out=D)
            return run_bound_wave, (), (d,)

        def run_bound() -> None:
            if half:
                if fp.exponents_above_1(bits, T) or fp.halves_exactly(bits):
                    np.multiply(x, k, out=TF)
                    np.add(TF, D, out=D)
                    return
            fp.fma32_pow2(x, k, D, out=D)
        return run_bound, (), (d,)
    bindable(run, bind)
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
    move: bool = False   # v_dual_mov_b32: the result is src0
    ufunc: np.ufunc | None = None   # fn is this ufunc of (src0, vsrc1): computed into vdst


def vopd(inst: Inst, x: VopdHalf, y: VopdHalf, clash: bool, slow: Exec) -> Exec:
    """Both halves of a VOPD pair on the planes (sources read before either writes; `clash`: the
    Y result may alias X's destination, so it is copied before X is written)."""
    parts = []
    ops: list[Operand] = []
    for h in (x, y):
        a, b = operand(h.src0, h.t, inst), operand(h.vsrc1, h.t, inst)
        k = PLANE.get(h.t)
        if a is None or b is None or k is None:
            return slow
        ops += [a, b]
        lit = np.array(inst.literal or 0, dtype=np.uint32).view(DTYPES[h.t])
        parts.append((a, b, k, h.vdst, h.reads_dst, h.fn, lit, h.move))
    ((kax, iax), (kbx, ibx), kx, dx, accx, fx, lx, movx), \
        ((kay, iay), (kby, iby), ky, dy, accy, fy, ly, movy) = parts
    sr = sgprs_read(ops)
    # Where Y does not read X's destination, X is written first and a ufunc half computes
    # straight into its register (no temporary, no copy).
    ux = x.ufunc if not clash else None
    uy = y.ufunc if not clash else None

    def both(ax: np.ndarray, bx: np.ndarray, acc_x: np.ndarray, ay: np.ndarray, by: np.ndarray,
             acc_y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rx = ax if movx else fx(ax, bx, acc_x if accx else None, lx)
        ry = ay if movy else fy(ay, by, acc_y if accy else None, ly)
        return rx, np.array(ry) if clash else ry
    partial = partial_exec(ops[:2] + [(kx, dx)] + ops[2:] + [(ky, dy)], [(kx, dx), (ky, dy)],
                           both, slow)

    def run(g: WaveSet) -> None:
        P = g.fast
        if P is None:
            return partial(g)
        if sr and g.dirty and not sr.isdisjoint(g.dirty):
            pack_lane_masks(g, sr)
        A = P.views
        dv = P.dirty_v
        dv.add(dx)
        dv.add(dy)
        if ux is not None or uy is not None:
            ax = A[kax, iax] if kax >= 0 else iax
            if ux is not None:
                ux(ax, A[kbx, ibx] if kbx >= 0 else ibx, out=A[kx, dx])
            else:
                A[kx, dx][...] = ax if movx else fx(ax, A[kbx, ibx] if kbx >= 0 else ibx,
                                                    A[kx, dx] if accx else None, lx)
            ay = A[kay, iay] if kay >= 0 else iay
            if uy is not None:
                uy(ay, A[kby, iby] if kby >= 0 else iby, out=A[ky, dy])
            else:
                A[ky, dy][...] = ay if movy else fy(ay, A[kby, iby] if kby >= 0 else iby,
                                                    A[ky, dy] if accy else None, ly)
            return
        # (a move's result is its source: no call, and its unused VSRC1 is not read)
        ax = A[kax, iax] if kax >= 0 else iax
        rx = ax if movx else fx(ax, A[kbx, ibx] if kbx >= 0 else ibx,
                                A[kx, dx] if accx else None, lx)
        ay = A[kay, iay] if kay >= 0 else iay
        ry = ay if movy else fy(ay, A[kby, iby] if kby >= 0 else iby,
                                A[ky, dy] if accy else None, ly)
        if clash:
            ry = np.array(ry)
        A[kx, dx][...] = rx
        A[ky, dy][...] = ry

    if clash:
        return run

    def half(a: Any, b: Any, D: np.ndarray, move: bool, u: np.ufunc | None,
             fn: Callable[..., np.ndarray], acc: bool, lit: Any
             ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        # one half computed into its register: a ufunc with its output, a move as a copy,
        # else the lane function's result assigned
        if u is not None:
            return u, (a, b, D)
        if move:
            return operator.setitem, (D, Ellipsis, a)

        def other() -> None:
            D[...] = fn(a, b, D if acc else None, lit)
        return other, ()

    def bind(g: WaveSet, P: Planes) -> Bound:
        # the in-place form above on views looked up once (X written first: Y does not read
        # X's destination)
        A = P.views
        fx_, ax_ = half(_operand_of(A, kax, iax), _operand_of(A, kbx, ibx), A[kx, dx], movx,
                        ux, fx, accx, lx)
        fy_, ay_ = half(_operand_of(A, kay, iay), _operand_of(A, kby, iby), A[ky, dy], movy,
                        uy, fy, accy, ly)

        def run_bound() -> None:
            fx_(*ax_)
            fy_(*ay_)
        run_bound.parts = ((fx_, ax_), (fy_, ay_))   # type: ignore[attr-defined]
        return run_bound, (), (dx, dy)
    bindable(run, bind)
    return run


def compare(inst: Inst, srcs: tuple[str, ...], cmp: Callable[..., np.ndarray],
            write: Callable[[WaveSet, np.ndarray], None], slow: Exec) -> Exec:
    """A VALU compare with its operands read from the planes; `write(g, lane_results)` stores
    the lane mask (EXEC-masked, into VCC, an SGPR or EXEC) as the general path does."""
    got = [operand(inst.f[f"src{i}"], t, inst) for i, t in enumerate(srcs)]
    ops = [x for x in got if x is not None]
    if len(ops) != 2 or len(got) != 2 or not is_plain(inst) or inst.enc not in ("VOPC", "VOP3"):
        return slow
    (k0, i0), (k1, i1) = ops
    sregs = sgprs_read(ops)

    def run(g: WaveSet) -> None:
        P = g.planes
        if P is None:
            return slow(g)
        if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
            pack_lane_masks(g, sregs)
        A = P.views
        write(g, cmp(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1))
    return run
