"""PTX instructions as numpy functions: `compile_instr` turns one parsed instruction into
(control kind, function(state, threads), branch target), or raises `Unsupported` saying why the
interpreter cannot run it (the audit tool's answer). `ops_table()` maps the first word of an
opcode to its compiler; each compiler reads its operands through `reader` / `writer`, which view
a register's raw bits as the instruction's type."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from runtime.drivers.mock.ptx import tensor
from runtime.drivers.mock.ptx.parse import Instr, Operand
from runtime.drivers.mock.ptx.types import (TYPES, PtxType, U, bf16_to_f32, f32_to_bf16,
                                            f64_to_bf16, float_to_int, ftz, round_f32,
                                            round_to_int_float)

if TYPE_CHECKING:
    from runtime.drivers.mock.ptx.execute import Kernel, State

Fn = Callable[["State", Any], None]
ALL = slice(None)
WINDOW_B = 1 << 32
_REG_DTYPE: dict[int, np.dtype[Any]] = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16),
                                        4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


class Unsupported(Exception):
    """An instruction the interpreter does not implement (the audit tool lists these)."""


def reg_dtype(type_: str) -> np.dtype[Any]:
    """Storage of a register of PTX type `type_`: its raw bits (bool for predicates)."""
    if type_ == "pred":
        return np.dtype(np.bool_)
    t = TYPES.get(type_)
    if t is None or t.size not in _REG_DTYPE:
        raise Unsupported(f"registers of type .{type_}")
    return _REG_DTYPE[t.size]


def _types(ins: Instr) -> list[PtxType]:
    return [TYPES[m] for m in ins.mods if m in TYPES]


def _type(ins: Instr, k: int = -1) -> PtxType:
    ts = _types(ins)
    if not ts:
        raise Unsupported(f"{ins.opcode}: no type")
    return ts[k]


# ------------------------------------------------------------------------------ operand access
Reader = Callable[["State", Any], Any]


def _imm(o: Operand, t: PtxType) -> Any:
    if t.kind == "pred":
        return np.bool_(o.value != 0)
    v: Any
    if t.kind == "f":
        if o.fbits == 32:
            v = np.array(o.value, np.uint32).view(np.float32)[()]
        elif o.fbits == 64:
            v = np.array(o.value, np.uint64).view(np.float64)[()]
        else:
            v = float(o.value)
        return t.dtype.type(v)
    if t.kind == "bf" and o.fbits:
        v = np.array(o.value, np.uint32 if o.fbits == 32 else np.uint64) \
            .view(np.float32 if o.fbits == 32 else np.float64)[()]
        return f32_to_bf16(np.asarray(v, np.float32))[()]
    if o.fbits == 32 and t.size == 4:
        return np.uint32(o.value).view(t.dtype) if t.kind != "f" else t.dtype.type(o.value)
    mask = (1 << (8 * t.size)) - 1
    return np.array(o.value & mask, t.udtype).view(t.dtype)[()]


def reader(k: "Kernel", o: Operand, t: PtxType) -> Reader:
    """A function reading operand `o` as type `t` for the selected threads (an array, or a numpy
    scalar for constants)."""
    if o.kind == "reg":
        r = o.reg
        rdt = k.reg_dtypes[r]
        neg = o.neg
        if rdt == t.udtype or (t.kind == "pred" and rdt == np.bool_):
            if t.dtype == rdt:
                if neg:
                    return lambda st, sel: ~st.R[r][sel]
                return lambda st, sel: st.R[r][sel]
            dt = t.dtype
            return lambda st, sel: st.R[r][sel].view(dt)
        if rdt == np.bool_:
            raise Unsupported(f"predicate register read as .{t.name}")
        udt, dt = t.udtype, t.dtype
        if t.kind == "s" and rdt.itemsize < t.size:
            sdt = np.dtype(f"i{rdt.itemsize}")
            return lambda st, sel: st.R[r][sel].view(sdt).astype(dt)
        return lambda st, sel: st.R[r][sel].astype(udt).view(dt)
    if o.kind == "imm":
        v = _imm(o, t)
        return lambda st, sel: v
    if o.kind == "special":
        f = special_reader(o.name)
        dt = t.dtype
        return lambda st, sel: f(st, sel).astype(np.uint64).astype(t.udtype).view(dt)
    if o.kind == "sym":
        return symbol_reader(k, o.name, t)
    raise Unsupported(f"operand kind {o.kind} as a value")


def symbol_reader(k: "Kernel", name: str, t: PtxType) -> Reader:
    """The address of a variable or parameter, in its own state space (`mov %rd, sym`)."""
    if name in k.params:
        off = k.params[name].offset
        return lambda st, sel: t.dtype.type(off)
    if name in k.body.locals:
        off = k.body.locals[name][0]
        return lambda st, sel: t.dtype.type(off)
    if name in k.data_offs:
        off = k.data_offs[name]
        return lambda st, sel: t.dtype.type((st.env.data_va + off) & ((1 << 8 * t.size) - 1))
    if name in k.mod.variables and k.mod.variables[name].space == "shared" or \
            any(v.name == name for v in k.mod.local_shared.get(k.name, [])):
        return lambda st, sel: t.dtype.type(st.shared_offsets[name])
    raise Unsupported(f"symbol {name} is not a parameter or variable of the module")


def writer(k: "Kernel", o: Operand) -> Callable[["State", Any, Any], None]:
    """A function storing values (of any dtype) into destination register `o`."""
    if o.kind == "sink":
        return lambda st, sel, v: None
    if o.kind != "reg":
        raise Unsupported(f"destination operand of kind {o.kind}")
    r = o.reg
    rdt = k.reg_dtypes[r]

    def write(st: "State", sel: Any, v: Any) -> None:
        v = np.asarray(v)
        if v.dtype != rdt:
            if rdt == np.bool_:
                v = v.astype(np.bool_)
            elif v.dtype.itemsize == rdt.itemsize:
                v = v.view(rdt)
            elif v.dtype.kind == "i":
                v = v.astype(np.dtype(f"i{rdt.itemsize}")).view(rdt)
            elif v.dtype.kind == "b":
                v = v.astype(rdt)
            else:
                v = v.view(U[v.dtype.itemsize]).astype(rdt)
        st.R[r][sel] = v
    return write


# ------------------------------------------------------------------------------ special regs
def special_reader(name: str) -> Callable[["State", Any], Any]:
    base, _, comp = name.partition(".")
    ax = "xyz".find(comp) if comp else -1
    if base == "%tid" and ax >= 0:
        return lambda st, sel: st.tid[ax][sel]
    if base == "%ntid" and ax >= 0:
        return lambda st, sel: np.uint32(st.env.block[ax])
    if base == "%ctaid" and ax >= 0:
        return lambda st, sel: st.ctaid[ax][sel]
    if base == "%nctaid" and ax >= 0:
        return lambda st, sel: np.uint32(st.env.grid[ax])
    if base == "%laneid":
        return lambda st, sel: st.lane[sel]
    if base == "%warpid":
        return lambda st, sel: st.t[sel] // np.uint32(32)
    if base == "%nwarpid":
        return lambda st, sel: np.uint32(-(-st.bt // 32))
    if base in ("%smid", "%gridid"):
        return lambda st, sel: np.uint32(0)
    if base == "%nsmid":
        return lambda st, sel: np.uint32(132)
    if base in ("%clock", "%clock64", "%clock_hi"):
        return lambda st, sel: np.uint64(st.steps)
    if base in ("%globaltimer", "%globaltimer_lo"):
        return lambda st, sel: np.uint64(st.env.clock_ns())
    if base == "%globaltimer_hi":
        return lambda st, sel: np.uint64(st.env.clock_ns() >> 32)
    if base.startswith("%lanemask_"):
        kind = base[len("%lanemask_"):]

        def lm(st: "State", sel: Any) -> Any:
            lane = st.lane[sel].astype(np.uint64)
            bit = np.uint64(1) << lane
            full = np.uint64(0xFFFFFFFF)
            v = {"eq": bit, "lt": bit - np.uint64(1), "le": (bit << np.uint64(1)) - np.uint64(1),
                 "gt": full & ~((bit << np.uint64(1)) - np.uint64(1)),
                 "ge": full & ~(bit - np.uint64(1))}[kind]
            return v
        return lm
    if base == "%dynamic_smem_size":
        return lambda st, sel: np.uint32(st.env.shared_B - st.env.static_end)
    if base == "%total_smem_size":
        return lambda st, sel: np.uint32(st.env.shared_B)
    if base in ("%is_explicit_cluster",):
        return lambda st, sel: np.uint32(0)
    if base in ("%clusterid", "%cluster_ctaid", "%cluster_ctarank"):
        return lambda st, sel: np.uint32(0)
    if base in ("%nclusterid", "%cluster_nctaid", "%cluster_nctarank"):
        return lambda st, sel: np.uint32(1)
    raise Unsupported(f"special register {name}")


# ------------------------------------------------------------------------------ compile
def compile_instr(k: "Kernel", ins: Instr, index: int) -> tuple[int, Fn, int]:
    """(control kind, function, branch target) for one instruction; raises `Unsupported`."""
    from runtime.drivers.mock.ptx.execute import K_BAR, K_BRA, K_EXIT, K_NORMAL, K_TRAP
    op = ins.op
    if op == "bra":
        tgt = ins.args[0]
        if tgt.kind != "sym" or tgt.name not in k.body.labels:
            raise Unsupported(f"bra to {tgt.name or tgt.kind} (not a label of the kernel)")
        return K_BRA, _nop, k.body.labels[tgt.name]
    if op in ("ret", "exit"):
        return K_EXIT, _nop, 0
    if op == "trap":
        return K_TRAP, _nop, 0
    if op in ("bar", "barrier") and (not ins.mods or ins.mods[0] in ("sync", "aligned")
                                     or ins.mods[:2] == ("cta", "sync")):
        if op == "bar" and ins.mods and ins.mods[0] == "warp":
            return K_NORMAL, guarded(ins, _nop), 0
        if len(ins.args) > 1:
            raise Unsupported(f"{ins.opcode} with a thread count (named barrier subsets)")
        return K_BAR, _nop, 0
    if op == "bar" and ins.mods[:1] == ("warp",):
        return K_NORMAL, _nop, 0
    if op in ("bar", "barrier") and "red" in ins.mods:
        # bar.red.{popc.u32,and.pred,or.pred} d, id, [count,] {!}p: a barrier whose threads
        # reduce a predicate over the CTA (what __syncthreads_count/_and/_or compile to)
        red = next((m for m in ins.mods if m in ("popc", "and", "or")), None)
        if red is None or len(ins.args) != 3:
            raise Unsupported(f"{ins.opcode} (only popc/and/or without a thread count)")
        k.bar_reds[index] = (red, reader(k, ins.args[2], TYPES["pred"]), writer(k, ins.args[0]))
        return K_BAR, _nop, 0
    f = ops_table().get(op)
    if f is None:
        raise Unsupported(f"{ins.opcode}")
    return K_NORMAL, guarded(ins, f(k, ins)), 0


def _nop(st: "State", sel: Any) -> None:
    return None


def guarded(ins: Instr, fn: Fn) -> Fn:
    if ins.guard is None:
        return fn
    g, neg = ins.guard

    def run(st: "State", sel: Any) -> None:
        p = st.R[g][sel]
        if neg:
            p = ~p
        if isinstance(sel, slice):
            if p.all():
                fn(st, sel)
                return
            sub = np.nonzero(p)[0]
        else:
            sub = sel[p]
        if len(sub):
            fn(st, sub)
    return run


def check_barrier(st: "State", ins: Instr, sel: Any) -> None:
    """`bar.sync` is aligned: every live thread of a warp must execute the same barrier
    instruction together; otherwise the behaviour is undefined and the hardware may hang, so the
    mock faults."""
    if isinstance(sel, slice):
        return
    from runtime.drivers.mock.ptx.execute import fault_at
    mark = np.zeros(st.n, np.bool_)
    mark[sel] = True
    live = ~st.done
    # warps with a thread at this barrier must have all their live threads here
    pad = (-st.n) % 32
    missing = np.concatenate([live & ~mark, np.zeros(pad, np.bool_)]).reshape(-1, 32)
    present = np.concatenate([mark, np.zeros(pad, np.bool_)]).reshape(-1, 32)
    bad_warp = present.any(axis=1) & missing.any(axis=1)
    if bad_warp.any():
        w = int(np.argmax(bad_warp))
        idx = np.arange(w * 32, min(w * 32 + 32, st.n))
        absent = idx[(~mark[idx]) & live[idx]]
        raise fault_at(st, ins, absent, np.ones(len(absent), np.bool_),
                       "barrier divergence: threads of a warp reach different barriers (or none)")


# ------------------------------------------------------------------------------ arithmetic
def _alu(k: "Kernel", ins: Instr, n_in: int, f: Callable[..., Any],
         t: PtxType | None = None) -> Fn:
    t = t or _type(ins)
    w = writer(k, ins.args[0])
    rs = [reader(k, a, t) for a in ins.args[1:1 + n_in]]
    if n_in == 1:
        r0 = rs[0]
        return lambda st, sel: w(st, sel, f(r0(st, sel)))
    if n_in == 2:
        r0, r1 = rs
        return lambda st, sel: w(st, sel, f(r0(st, sel), r1(st, sel)))
    r0, r1, r2 = rs
    return lambda st, sel: w(st, sel, f(r0(st, sel), r1(st, sel), r2(st, sel)))


def _fmode(ins: Instr) -> str:
    for m in ins.mods:
        if m in ("rn", "rz", "rm", "rp"):
            return m
    return "rn"


def _float_post(ins: Instr, t: PtxType) -> Callable[[Any], Any]:
    flush = "ftz" in ins.mods and t.size == 4
    sat = "sat" in ins.mods

    def post(v: Any) -> Any:
        if flush:
            v = ftz(v)
        if sat:
            v = np.where(np.isnan(v), 0, np.clip(v, 0, 1)).astype(np.asarray(v).dtype)
        return v
    return post


def _float_in(ins: Instr, t: PtxType) -> Callable[[Any], Any]:
    if "ftz" in ins.mods and t.size == 4:
        return ftz
    return lambda v: v


def _bf(t: PtxType, f: Callable[..., Any]) -> Callable[..., Any]:
    """Lifts a float function to bf16 operands (bits in, bits out): computed in float64 and
    rounded once."""
    return lambda *a: f64_to_bf16(f(*(bf16_to_f32(x).astype(np.float64) for x in a)))


def _half(f: Callable[..., Any]) -> Callable[..., Any]:
    """An f16 function computed in float64 and rounded once to f16."""
    return lambda *a: np.asarray(f(*(np.asarray(x).astype(np.float64) for x in a))) \
        .astype(np.float16)


def _x2(t: PtxType, f: Callable[..., Any]) -> Callable[..., Any]:
    """Lifts a scalar half function to packed pairs (.f16x2 / .bf16x2)."""
    bf = t.name == "bf16x2"

    def unpack(v: Any) -> tuple[Any, Any]:
        v = np.asarray(v, np.uint32)
        lo, hi = (v & np.uint32(0xFFFF)).astype(np.uint16), (v >> np.uint32(16)).astype(np.uint16)
        if bf:
            return bf16_to_f32(lo).astype(np.float64), bf16_to_f32(hi).astype(np.float64)
        return lo.view(np.float16).astype(np.float64), hi.view(np.float16).astype(np.float64)

    def pack(lo: Any, hi: Any) -> Any:
        if bf:
            lo, hi = f64_to_bf16(lo), f64_to_bf16(hi)
        else:
            lo, hi = np.asarray(lo, np.float16).view(np.uint16), np.asarray(hi, np.float16) \
                .view(np.uint16)
        return np.asarray(lo, np.uint32) | (np.asarray(hi, np.uint32) << np.uint32(16))

    def run(*a: Any) -> Any:
        parts = [unpack(x) for x in a]
        lo = f(*(p[0] for p in parts))
        hi = f(*(p[1] for p in parts))
        return pack(lo, hi)
    return run


def _lift(ins: Instr, t: PtxType, f: Callable[..., Any]) -> Callable[..., Any]:
    if t.kind == "bf":
        return _bf(t, f)
    if t.kind == "x2":
        return _x2(t, f)
    if t.kind == "f" and t.size == 2:
        return _half(f)
    return f


def _op_add(k: "Kernel", ins: Instr, sub: bool = False) -> Fn:
    t = _type(ins)
    if t.kind in ("f", "bf", "x2"):
        mode = _fmode(ins)
        pin, post = _float_in(ins, t), _float_post(ins, t)
        if t.size == 4 and t.kind == "f" and mode != "rn":
            def f(a: Any, b: Any) -> Any:
                a64, b64 = np.float64(1) * pin(a), np.float64(1) * pin(b)
                return post(round_f32(a64 - b64 if sub else a64 + b64, mode))
        else:
            def f(a: Any, b: Any) -> Any:
                return post(pin(a) - pin(b) if sub else pin(a) + pin(b))
        return _alu(k, ins, 2, _lift(ins, t, f), t)
    if "sat" in ins.mods:  # s32 saturating
        def g(a: Any, b: Any) -> Any:
            r = a.astype(np.int64) - b if sub else np.asarray(a, np.int64) + b
            return np.clip(r, -2**31, 2**31 - 1).astype(np.int32)
        return _alu(k, ins, 2, g, t)
    if "cc" in ins.mods or ins.op in ("addc", "subc"):
        raise Unsupported(f"{ins.opcode} (carry chains)")
    return _alu(k, ins, 2, (lambda a, b: a - b) if sub else (lambda a, b: a + b), t)


def _wide_type(t: PtxType) -> PtxType:
    return TYPES[f"{'s' if t.kind == 's' else 'u'}{t.size * 16}"]


def _mulhi(a: Any, b: Any, t: PtxType) -> Any:
    if t.size <= 4:
        wide = np.int64 if t.kind == "s" else np.uint64
        return ((np.asarray(a).astype(wide) * np.asarray(b).astype(wide)) >> (8 * t.size)) \
            .astype(t.dtype)
    # 64x64 -> high 64 through 32-bit halves (unsigned), then the signed correction
    au, bu = np.asarray(a).view(np.uint64), np.asarray(b).view(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    a_lo, a_hi, b_lo, b_hi = au & m32, au >> np.uint64(32), bu & m32, bu >> np.uint64(32)
    ll, lh, hl, hh = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (ll >> np.uint64(32)) + (lh & m32) + (hl & m32)
    hi = hh + (lh >> np.uint64(32)) + (hl >> np.uint64(32)) + (mid >> np.uint64(32))
    if t.kind == "s":
        hi = hi - np.where(np.asarray(a).view(np.int64) < 0, bu, np.uint64(0)) \
            - np.where(np.asarray(b).view(np.int64) < 0, au, np.uint64(0))
    return hi.view(t.dtype)


def _op_mul(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    if t.kind in ("f", "bf", "x2"):
        mode = _fmode(ins)
        pin, post = _float_in(ins, t), _float_post(ins, t)
        if t.size == 4 and t.kind == "f" and mode != "rn":
            def f(a: Any, b: Any) -> Any:
                return post(round_f32(np.float64(1) * pin(a) * pin(b), mode))
        else:
            def f(a: Any, b: Any) -> Any:
                return post(pin(a) * pin(b))
        return _alu(k, ins, 2, _lift(ins, t, f), t)
    if "wide" in ins.mods:
        wt = _wide_type(t)
        return _alu(k, ins, 2, lambda a, b: np.asarray(a).astype(wt.dtype) * b.astype(wt.dtype)
                    if isinstance(b, np.ndarray) else np.asarray(a).astype(wt.dtype)
                    * wt.dtype.type(b), t)
    if "hi" in ins.mods:
        return _alu(k, ins, 2, lambda a, b: _mulhi(a, b, t), t)
    return _alu(k, ins, 2, lambda a, b: a * b, t)


def _op_mad(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    if t.kind in ("f", "bf", "x2") or ins.op == "fma":
        return _op_fma(k, ins)
    if "wide" in ins.mods:
        wt = _wide_type(t)
        w = writer(k, ins.args[0])
        ra, rb = reader(k, ins.args[1], t), reader(k, ins.args[2], t)
        rc = reader(k, ins.args[3], wt)

        def fw(st: "State", sel: Any) -> None:
            a = np.asarray(ra(st, sel)).astype(wt.dtype)
            b = np.asarray(rb(st, sel)).astype(wt.dtype)
            w(st, sel, a * b + rc(st, sel))
        return fw
    if "hi" in ins.mods:
        return _alu(k, ins, 3, lambda a, b, c: _mulhi(a, b, t) + c, t)
    if "sat" in ins.mods:
        raise Unsupported(f"{ins.opcode}")
    return _alu(k, ins, 3, lambda a, b, c: a * b + c, t)


def _fma64(a: Any, b: Any, c: Any) -> Any:
    """fma for float64: the product and sum in extended precision, then rounded once more (exact
    unless the result needs more than 64 significant bits)."""
    ld = np.longdouble
    return (np.asarray(a, ld) * np.asarray(b, ld) + np.asarray(c, ld)).astype(np.float64)


def _op_fma(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    mode = _fmode(ins)
    pin, post = _float_in(ins, t), _float_post(ins, t)
    if t.kind == "f" and t.size == 4:
        def f(a: Any, b: Any, c: Any) -> Any:
            exact = np.float64(1) * pin(a) * pin(b) + pin(c)
            return post(round_f32(exact, mode))
    elif t.kind == "f" and t.size == 8:
        def f(a: Any, b: Any, c: Any) -> Any:
            return post(_fma64(a, b, c))
    else:   # f16, bf16 and their pairs: computed in float64, rounded once by _lift
        def f(a: Any, b: Any, c: Any) -> Any:
            return post(np.float64(1) * a * b + c)
    return _alu(k, ins, 3, _lift(ins, t, f), t)


def _int_div(a: Any, b: Any, t: PtxType) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    if t.kind == "s":
        bz = np.where(b == 0, 1, b)
        q = np.abs(a.astype(np.int64) if t.size < 8 else a) // np.abs(bz)
        q = np.where((a < 0) != (bz < 0), -q, q)
        return np.where(b == 0, -1, q).astype(t.dtype)
    bz = np.where(b == 0, 1, b).astype(t.dtype)
    return np.where(b == 0, t.dtype.type(np.iinfo(t.dtype).max), a // bz).astype(t.dtype)


def _int_rem(a: Any, b: Any, t: PtxType) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    bz = np.where(b == 0, 1, b).astype(t.dtype)
    r = np.fmod(a, bz) if t.kind == "s" else a % bz
    return np.where(b == 0, a, r).astype(t.dtype)


def _op_div(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    if t.kind == "f":
        mode = _fmode(ins)
        pin, post = _float_in(ins, t), _float_post(ins, t)
        if t.size == 4 and mode != "rn" and "approx" not in ins.mods and "full" not in ins.mods:
            return _alu(k, ins, 2, lambda a, b: post(round_f32(
                np.float64(1) * pin(a) / pin(b), mode)), t)
        return _alu(k, ins, 2, lambda a, b: post(pin(a) / pin(b)), t)
    return _alu(k, ins, 2, lambda a, b: _int_div(a, b, t), t)


def _op_rem(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    return _alu(k, ins, 2, lambda a, b: _int_rem(a, b, t), t)


def _op_minmax(k: "Kernel", ins: Instr, is_max: bool) -> Fn:
    t = _type(ins)
    if t.kind in ("f", "bf", "x2"):
        nan = "NaN" in ins.mods
        f: Any
        if nan:
            f = np.maximum if is_max else np.minimum
        else:
            f = np.fmax if is_max else np.fmin
        post = _float_post(ins, t)
        pin = _float_in(ins, t)
        return _alu(k, ins, 2, _lift(ins, t, lambda a, b: post(f(pin(a), pin(b)))), t)
    if "relu" in ins.mods:
        raise Unsupported(ins.opcode)
    f2 = np.maximum if is_max else np.minimum
    return _alu(k, ins, 2, lambda a, b: f2(a, b).astype(t.dtype), t)


def _op_abs_neg(k: "Kernel", ins: Instr, neg: bool) -> Fn:
    t = _type(ins)
    if t.kind in ("f", "bf", "x2"):
        post, pin = _float_post(ins, t), _float_in(ins, t)
        if t.kind == "bf":
            m = np.uint16(0x8000)
            return _alu(k, ins, 1, (lambda a: a ^ m) if neg else (lambda a: a & ~m), t)
        return _alu(k, ins, 1, _lift(ins, t, (lambda a: post(-pin(a))) if neg else
                                     (lambda a: post(np.abs(pin(a))))), t)
    return _alu(k, ins, 1, (lambda a: (-a).astype(t.dtype)) if neg else
                (lambda a: np.abs(a).astype(t.dtype)), t)


def _op_unary_float(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    op = ins.op
    post, pin = _float_post(ins, t), _float_in(ins, t)
    mode = _fmode(ins)
    table: dict[str, Callable[[Any], Any]] = {
        "sqrt": np.sqrt, "rsqrt": lambda x: t.dtype.type(1) / np.sqrt(x),
        "rcp": lambda x: t.dtype.type(1) / x, "ex2": np.exp2, "lg2": np.log2, "sin": np.sin,
        "cos": np.cos, "tanh": np.tanh,
    }
    f = table[op]
    if t.kind == "f" and t.size == 4 and mode != "rn" and op in ("sqrt", "rcp") \
            and "approx" not in ins.mods:
        g: Callable[[Any], Any] = np.sqrt if op == "sqrt" else (lambda x: 1.0 / x)
        return _alu(k, ins, 1, lambda a: post(round_f32(g(np.float64(1) * pin(a)), mode)), t)
    return _alu(k, ins, 1, _lift(ins, t, lambda a: post(f(pin(a)).astype(a.dtype))), t)


def _op_copysign(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    # copysign.f32 d, a, b: |b| with the sign of a
    return _alu(k, ins, 2, lambda a, b: np.copysign(b, a).astype(t.dtype), t)


def _op_testp(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    kind = ins.mods[0]
    tests: dict[str, Callable[[Any], Any]] = {
        "finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x),
        "notanumber": np.isnan,
        "normal": lambda x: np.isfinite(x) & (np.abs(x) >= np.finfo(t.dtype).tiny),
        "subnormal": lambda x: (x != 0) & (np.abs(x) < np.finfo(t.dtype).tiny),
    }
    f = tests.get(kind)
    if f is None:
        raise Unsupported(ins.opcode)
    w = writer(k, ins.args[0])
    r = reader(k, ins.args[1], t)
    return lambda st, sel: w(st, sel, f(r(st, sel)))


# ------------------------------------------------------------------------------ bits
def _shift_amount(k: "Kernel", o: Operand) -> Reader:
    return reader(k, o, TYPES["u32"])


def _op_shift(k: "Kernel", ins: Instr, left: bool) -> Fn:
    t = _type(ins)
    w = writer(k, ins.args[0])
    ra = reader(k, ins.args[1], t)
    rb = _shift_amount(k, ins.args[2])
    bits = 8 * t.size

    def f(st: "State", sel: Any) -> None:
        a, b = ra(st, sel), rb(st, sel)
        b = np.asarray(b)
        big = b >= bits
        s = np.where(big, 0, b).astype(t.dtype)
        if left:
            r = np.where(big, t.dtype.type(0), a << s)
        else:
            fill = np.where(np.asarray(a) < 0, t.dtype.type(-1), t.dtype.type(0)) \
                if t.kind == "s" else t.dtype.type(0)
            r = np.where(big, fill, a >> s)
        w(st, sel, np.asarray(r).astype(t.dtype))
    return f


def _op_logic(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[ins.op]
    if t.kind == "pred":
        return _alu(k, ins, 2, lambda a, b: f(a, b), t)
    return _alu(k, ins, 2, f, t)


def _op_not(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    return _alu(k, ins, 1, np.invert if t.kind != "pred" else np.logical_not, t)


def _op_cnot(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    return _alu(k, ins, 1, lambda a: (np.asarray(a) == 0).astype(t.dtype), t)


def _popc(x: Any, size: int) -> Any:
    x = np.asarray(x).astype(np.uint64)
    c = np.zeros(x.shape, np.uint32)
    for _ in range(8 * size):
        c += (x & np.uint64(1)).astype(np.uint32)
        x = x >> np.uint64(1)
    return c


def _op_popc(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    w = writer(k, ins.args[0])
    r = reader(k, ins.args[1], TYPES[f"u{8 * t.size}"])
    return lambda st, sel: w(st, sel, _popc(r(st, sel), t.size))


def _clz(x: Any, size: int) -> Any:
    x = np.asarray(x).astype(np.uint64)
    n = np.full(x.shape, 8 * size, np.uint32)
    for b in range(8 * size):
        hit = ((x >> np.uint64(b)) & np.uint64(1)) == 1
        n = np.where(hit, np.uint32(8 * size - 1 - b), n)
    return n


def _op_clz(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    w = writer(k, ins.args[0])
    r = reader(k, ins.args[1], TYPES[f"u{8 * t.size}"])
    return lambda st, sel: w(st, sel, _clz(r(st, sel), t.size))


def _op_bfind(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    w = writer(k, ins.args[0])
    r = reader(k, ins.args[1], t)
    shiftamt = "shiftamt" in ins.mods
    bits = 8 * t.size

    def f(st: "State", sel: Any) -> None:
        a = np.asarray(r(st, sel))
        if t.kind == "s":
            a = np.where(a < 0, ~a, a)
        u = a.astype(np.uint64) & np.uint64((1 << bits) - 1)
        pos = np.full(u.shape, 0xFFFFFFFF, np.uint32)
        for b in range(bits):
            pos = np.where(((u >> np.uint64(b)) & np.uint64(1)) == 1, np.uint32(b), pos)
        if shiftamt:
            pos = np.where(pos == 0xFFFFFFFF, pos, np.uint32(bits - 1) - pos)
        w(st, sel, pos)
    return f


def _op_brev(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    bits = 8 * t.size

    def f(a: Any) -> Any:
        u = np.asarray(a).astype(np.uint64)
        out = np.zeros(u.shape, np.uint64)
        for b in range(bits):
            out |= ((u >> np.uint64(b)) & np.uint64(1)) << np.uint64(bits - 1 - b)
        return out.astype(t.dtype)
    return _alu(k, ins, 1, f, t)


def _op_bfe(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    w = writer(k, ins.args[0])
    ra = reader(k, ins.args[1], t)
    rb, rc = _shift_amount(k, ins.args[2]), _shift_amount(k, ins.args[3])
    bits = 8 * t.size

    def f(st: "State", sel: Any) -> None:
        a = np.asarray(ra(st, sel)).astype(np.uint64) & np.uint64((1 << bits) - 1)
        pos = np.asarray(rb(st, sel)).astype(np.uint64) & np.uint64(0xFF)
        ln = np.asarray(rc(st, sel)).astype(np.uint64) & np.uint64(0xFF)
        p = np.minimum(pos, np.uint64(bits - 1))
        x = np.where(pos >= bits, np.uint64(0), a >> p)
        ln_c = np.minimum(ln, np.uint64(bits))
        mask = np.where(ln_c >= 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.uint64(1) << np.minimum(ln_c, np.uint64(63))) - np.uint64(1))
        x = x & mask
        if t.kind == "s":
            sbit_pos = np.minimum(pos + ln - np.uint64(1), np.uint64(bits - 1))
            sbit = np.where(ln == 0, np.uint64(0), (a >> sbit_pos) & np.uint64(1))
            ext = np.where((sbit == 1) & (ln_c < bits), ~mask, np.uint64(0))
            x = x | ext
        w(st, sel, (x & np.uint64((1 << bits) - 1)).astype(t.udtype).view(t.dtype))
    return f


def _op_bfi(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    w = writer(k, ins.args[0])
    ra, rb = reader(k, ins.args[1], t), reader(k, ins.args[2], t)
    rc, rd = _shift_amount(k, ins.args[3]), _shift_amount(k, ins.args[4])
    bits = 8 * t.size

    def f(st: "State", sel: Any) -> None:
        a = np.asarray(ra(st, sel)).astype(np.uint64)
        b = np.asarray(rb(st, sel)).astype(np.uint64)
        pos = np.asarray(rc(st, sel)).astype(np.uint64) & np.uint64(0xFF)
        ln = np.asarray(rd(st, sel)).astype(np.uint64) & np.uint64(0xFF)
        ln_c = np.minimum(ln, np.uint64(bits))
        mask = np.where(ln_c >= 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.uint64(1) << np.minimum(ln_c, np.uint64(63))) - np.uint64(1))
        sh = np.minimum(pos, np.uint64(63))
        m = np.where(pos >= bits, np.uint64(0), mask << sh)
        r = (b & ~m) | ((a << sh) & m)
        w(st, sel, (r & np.uint64((1 << bits) - 1)).astype(t.udtype))
    return f


def _op_prmt(k: "Kernel", ins: Instr) -> Fn:
    if any(m in ins.mods for m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")):
        raise Unsupported(ins.opcode)
    u32 = TYPES["b32"]
    w = writer(k, ins.args[0])
    ra, rb, rc = (reader(k, a, u32) for a in ins.args[1:4])

    def f(st: "State", sel: Any) -> None:
        a = np.asarray(ra(st, sel)).astype(np.uint64)
        b = np.asarray(rb(st, sel)).astype(np.uint64)
        c = np.asarray(rc(st, sel)).astype(np.uint64)
        src = a | (b << np.uint64(32))
        out = np.zeros(np.broadcast(a, b, c).shape, np.uint64)
        for i in range(4):
            sel4 = (c >> np.uint64(4 * i)) & np.uint64(0xF)
            byte = (src >> ((sel4 & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            sign = np.where((byte & np.uint64(0x80)) != 0, np.uint64(0xFF), np.uint64(0))
            byte = np.where((sel4 & np.uint64(8)) != 0, sign, byte)
            out |= byte << np.uint64(8 * i)
        w(st, sel, out.astype(np.uint32))
    return f


def _op_lop3(k: "Kernel", ins: Instr) -> Fn:
    t = TYPES["b32"]
    w = writer(k, ins.args[0])
    ra, rb, rc = (reader(k, a, t) for a in ins.args[1:4])
    lut_o = ins.args[4]
    if lut_o.kind != "imm":
        raise Unsupported("lop3 with a non-constant table")
    lut = lut_o.value & 0xFF

    def f(st: "State", sel: Any) -> None:
        a, b, c = (np.asarray(r(st, sel)).astype(np.uint32) for r in (ra, rb, rc))
        out = np.zeros(np.broadcast(a, b, c).shape, np.uint32)
        for i in range(8):
            if lut >> i & 1:
                ta = a if i & 4 else ~a
                tb = b if i & 2 else ~b
                tc = c if i & 1 else ~c
                out |= ta & tb & tc
        w(st, sel, out)
    return f


def _op_shf(k: "Kernel", ins: Instr) -> Fn:
    t = TYPES["b32"]
    left = "l" in ins.mods
    clamp = "clamp" in ins.mods
    w = writer(k, ins.args[0])
    ra, rb = reader(k, ins.args[1], t), reader(k, ins.args[2], t)
    rc = _shift_amount(k, ins.args[3])

    def f(st: "State", sel: Any) -> None:
        a = np.asarray(ra(st, sel)).astype(np.uint64)
        b = np.asarray(rb(st, sel)).astype(np.uint64)
        c = np.asarray(rc(st, sel)).astype(np.uint64)
        n = np.minimum(c, np.uint64(32)) if clamp else c & np.uint64(31)
        x = (b << np.uint64(32)) | a
        r = (x << n) >> np.uint64(32) if left else x >> n
        w(st, sel, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    return f


# ------------------------------------------------------------------------------ compare/select
_INT_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
            "hi": np.greater, "hs": np.greater_equal}


def _cmp(op: str, t: PtxType) -> Callable[[Any, Any], Any]:
    if t.kind in ("f", "bf"):
        conv = bf16_to_f32 if t.kind == "bf" else (lambda x: x)
        if op == "num":
            return lambda a, b: ~(np.isnan(conv(a)) | np.isnan(conv(b)))
        if op == "nan":
            return lambda a, b: np.isnan(conv(a)) | np.isnan(conv(b))
        if op.endswith("u") and op[:-1] in _INT_CMP:
            base = _INT_CMP[op[:-1]]
            return lambda a, b: base(conv(a), conv(b)) | np.isnan(conv(a)) | np.isnan(conv(b))
        base2 = _INT_CMP[op]
        if op == "ne":
            return lambda a, b: (conv(a) != conv(b)) & ~(np.isnan(conv(a)) | np.isnan(conv(b)))
        return lambda a, b: base2(conv(a), conv(b))
    return _INT_CMP[op]


def _op_setp(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    cmp_op = ins.mods[0]
    boolop = next((m for m in ins.mods[1:] if m in ("and", "or", "xor")), None)
    f = _cmp(cmp_op, t)
    dst = ins.args[0]
    dests = dst.elems if dst.kind == "vec" else (dst,)
    wp = writer(k, dests[0])
    wq = writer(k, dests[1]) if len(dests) > 1 else None
    ra, rb = reader(k, ins.args[1], t), reader(k, ins.args[2], t)
    pred = TYPES["pred"]
    rc = reader(k, ins.args[3], pred) if boolop else None
    bf = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop or "")

    def run(st: "State", sel: Any) -> None:
        r = np.asarray(f(ra(st, sel), rb(st, sel)))
        if rc is not None and bf is not None:
            c = rc(st, sel)
            p, q = bf(r, c), bf(~r, c)
        else:
            p, q = r, ~r
        wp(st, sel, p)
        if wq is not None:
            wq(st, sel, q)
    return run


def _op_set(k: "Kernel", ins: Instr) -> Fn:
    dt, st_ = _types(ins)[0], _types(ins)[-1]
    f = _cmp(ins.mods[0], st_)
    w = writer(k, ins.args[0])
    ra, rb = reader(k, ins.args[1], st_), reader(k, ins.args[2], st_)
    one = dt.dtype.type(1.0) if dt.kind == "f" else dt.dtype.type(-1)

    def run(st: "State", sel: Any) -> None:
        r = np.asarray(f(ra(st, sel), rb(st, sel)))
        w(st, sel, np.where(r, one, dt.dtype.type(0)))
    return run


def _op_selp(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    w = writer(k, ins.args[0])
    ra, rb = reader(k, ins.args[1], t), reader(k, ins.args[2], t)
    rc = reader(k, ins.args[3], TYPES["pred"])
    return lambda st, sel: w(st, sel, np.asarray(np.where(rc(st, sel), ra(st, sel),
                                                          rb(st, sel))).astype(t.dtype))


def _op_slct(k: "Kernel", ins: Instr) -> Fn:
    ts = _types(ins)
    t, ct = ts[0], ts[-1]
    w = writer(k, ins.args[0])
    ra, rb = reader(k, ins.args[1], t), reader(k, ins.args[2], t)
    rc = reader(k, ins.args[3], ct)
    return lambda st, sel: w(st, sel, np.asarray(np.where(np.asarray(rc(st, sel)) >= 0,
                                                          ra(st, sel), rb(st, sel)))
                             .astype(t.dtype))


# ------------------------------------------------------------------------------ moves/convert
def _op_mov(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    dst, src = ins.args[0], ins.args[1]
    if dst.kind == "vec":  # unpack: mov.b64 {lo, hi}, x
        n = len(dst.elems)
        part = TYPES[f"b{8 * t.size // n}"]
        ws = [writer(k, e) for e in dst.elems]
        r = reader(k, src, t)
        bits = 8 * part.size

        def unpack(st: "State", sel: Any) -> None:
            v = np.asarray(r(st, sel)).view(t.udtype).astype(np.uint64)
            for i, wi in enumerate(ws):
                wi(st, sel, ((v >> np.uint64(bits * i)) & np.uint64((1 << bits) - 1))
                   .astype(part.udtype))
        return unpack
    w = writer(k, dst)
    if src.kind == "vec":  # pack: mov.b64 x, {lo, hi}
        n = len(src.elems)
        part = TYPES[f"b{8 * t.size // n}"]
        rs = [reader(k, e, part) for e in src.elems]
        bits = 8 * part.size

        def pack(st: "State", sel: Any) -> None:
            acc: Any = np.uint64(0)
            for i, ri in enumerate(rs):
                acc = acc | (np.asarray(ri(st, sel)).astype(np.uint64) << np.uint64(bits * i))
            w(st, sel, np.asarray(acc).astype(t.udtype))
        return pack
    r = reader(k, src, t)
    return lambda st, sel: w(st, sel, r(st, sel))


def _op_cvt(k: "Kernel", ins: Instr) -> Fn:
    ts = _types(ins)
    if len(ts) < 2:
        raise Unsupported(f"{ins.opcode}: cvt needs a destination and a source type")
    dt, stype = ts[0], ts[1]
    mods = set(ins.mods)
    mode = next((m for m in ins.mods if m in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi",
                                               "rna", "rs")), "")
    if "tf32" in ins.mods and stype.name == "f32" and mode == "rna" and "satfinite" not in \
            ins.mods:
        # cvt.rna.tf32.f32: keep 10 mantissa bits, rounding half away from zero (NaN and
        # infinity pass unchanged)
        wt = writer(k, ins.args[0])
        rt = reader(k, ins.args[1], TYPES["b32"])

        def tf32(st: "State", sel: Any) -> None:
            b = np.asarray(rt(st, sel)).astype(np.uint32)
            special = (b & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
            r = (b + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
            wt(st, sel, np.where(special, b, r))
        return tf32
    if mode in ("rna", "rs"):
        raise Unsupported(ins.opcode)
    sat = "sat" in mods
    flush = "ftz" in mods
    w = writer(k, ins.args[0])
    if dt.kind == "x2":  # cvt.rn.f16x2.f32 d, a, b: a -> upper half, b -> lower half
        ra, rb = reader(k, ins.args[1], stype), reader(k, ins.args[2], stype)
        bf = dt.name == "bf16x2"

        def to_half(x: Any) -> Any:
            x = np.asarray(x, np.float32)
            if bf:
                return f32_to_bf16(x, "rz" if mode == "rz" else "rn").astype(np.uint32)
            return np.asarray(x.astype(np.float16)).view(np.uint16).astype(np.uint32)

        return lambda st, sel: w(st, sel, (to_half(ra(st, sel)) << np.uint32(16))
                                 | to_half(rb(st, sel)))
    r = reader(k, ins.args[1], stype)

    def conv(x: Any) -> Any:
        x = np.asarray(x)
        if stype.kind == "bf":
            x = bf16_to_f32(x)
            src_float = True
        else:
            src_float = stype.kind == "f"
        if src_float and flush and x.dtype == np.float32:
            x = ftz(x)
        if dt.kind in ("u", "s", "b"):
            if src_float:
                return float_to_int(x, dt if dt.kind != "b" else TYPES[f"u{8 * dt.size}"],
                                    mode or "rzi")
            if sat:
                info = np.iinfo(dt.dtype)
                return np.clip(x.astype(np.float64) if x.dtype.itemsize == 8 else
                               x.astype(np.int64), info.min, info.max).astype(dt.dtype)
            if stype.kind == "s" and dt.size > stype.size:
                return x.astype(dt.dtype)
            return x.astype(U[stype.size]).astype(dt.udtype).view(dt.dtype)
        if dt.kind == "f" or dt.kind == "bf":
            target = np.float32 if dt.kind == "bf" else dt.dtype
            if src_float:
                if mode in ("rni", "rzi", "rmi", "rpi"):
                    y = round_to_int_float(x, mode).astype(target)
                elif dt.size == 4 and dt.kind == "f" and x.dtype == np.float64 and mode not in \
                        ("", "rn"):
                    y = round_f32(x, mode)
                elif dt.kind == "f" and dt.size == 2 and mode == "rz":
                    y = _f32_to_f16_rz(np.asarray(x, np.float32))
                else:
                    y = x.astype(target)
            else:
                if dt.size == 4 and dt.kind == "f" and mode not in ("", "rn"):
                    y = round_f32(x.astype(np.float64), mode) if x.dtype.itemsize <= 4 else \
                        x.astype(np.float32)
                else:
                    y = x.astype(target)
            if flush and y.dtype == np.float32:
                y = ftz(y)
            if sat:
                y = np.where(np.isnan(y), 0, np.clip(y, 0, 1)).astype(y.dtype)
            if dt.kind == "bf":
                return f32_to_bf16(y, "rz" if mode == "rz" else "rn")
            return y
        raise Unsupported(ins.opcode)
    return lambda st, sel: w(st, sel, conv(r(st, sel)))


def _f32_to_f16_rz(x: Any) -> Any:
    y = x.astype(np.float16)
    over = np.abs(y.astype(np.float32)) > np.abs(x)
    return np.where(over & np.isfinite(x), np.nextafter(y, np.float16(0)), y)


def _op_cvta(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    to = "to" in ins.mods
    space = next((m for m in ins.mods if m in ("global", "shared", "local", "const", "param")),
                 None)
    if space is None:
        raise Unsupported(ins.opcode)
    w = writer(k, ins.args[0])
    r = reader(k, ins.args[1], t)
    if space in ("global", "const"):
        return lambda st, sel: w(st, sel, r(st, sel))
    if space == "param":
        raise Unsupported(f"{ins.opcode} (generic addresses of kernel parameters)")

    def f(st: "State", sel: Any) -> None:
        base = st.env.shared_window if space == "shared" else st.env.local_window
        v = np.asarray(r(st, sel)).astype(np.uint64)
        v = v - np.uint64(base) if to else v + np.uint64(base)
        w(st, sel, v.astype(t.udtype))
    return f


# ------------------------------------------------------------------------------ small integer ops
def _op_sad(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    return _alu(k, ins, 3, lambda a, b, c: (np.abs(np.asarray(a).astype(np.int64) - b)
                                            + c).astype(t.dtype), t)


def _int24(x: Any, signed: bool) -> Any:
    x = np.asarray(x).astype(np.int64) & 0xFFFFFF
    return np.where(x >= 1 << 23, x - (1 << 24), x) if signed else x


def _op_mul24(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    signed, hi = t.kind == "s", "hi" in ins.mods

    def f(a: Any, b: Any, *c: Any) -> Any:
        p = _int24(a, signed) * _int24(b, signed)
        r = (p >> 16) if hi else p
        if c:
            r = r + np.asarray(c[0]).astype(np.int64)
        return (r & 0xFFFFFFFF).astype(np.uint32).view(t.dtype)
    return _alu(k, ins, 3 if ins.op == "mad24" else 2, f, t)


def _bytes(x: Any, n: int, width: int, signed: bool) -> list[Any]:
    x = np.asarray(x).astype(np.int64) & 0xFFFFFFFF
    out = []
    for i in range(n):
        v = (x >> (width * i)) & ((1 << width) - 1)
        out.append(np.where(v >= 1 << (width - 1), v - (1 << width), v) if signed else v)
    return out


def _op_dp(k: "Kernel", ins: Instr) -> Fn:
    ts = _types(ins)
    if len(ts) != 2:
        raise Unsupported(ins.opcode)
    at, bt = ts
    four = ins.op == "dp4a"
    hi = "hi" in ins.mods
    w = writer(k, ins.args[0])
    ra, rb = reader(k, ins.args[1], TYPES["b32"]), reader(k, ins.args[2], TYPES["b32"])
    out_t = TYPES["s32"] if "s" in (at.kind, bt.kind) else TYPES["u32"]
    rc = reader(k, ins.args[3], out_t)

    def f(st: "State", sel: Any) -> None:
        a, b = ra(st, sel), rb(st, sel)
        if four:
            pa, pb = _bytes(a, 4, 8, at.kind == "s"), _bytes(b, 4, 8, bt.kind == "s")
        else:
            pa = _bytes(a, 2, 16, at.kind == "s")
            pb = _bytes(b, 4, 8, bt.kind == "s")[2 if hi else 0:][:2]
        acc = np.asarray(rc(st, sel)).astype(np.int64)
        for x, y in zip(pa, pb):
            acc = acc + x * y
        w(st, sel, (acc & 0xFFFFFFFF).astype(np.uint32).view(out_t.dtype))
    return f


# ------------------------------------------------------------------------------ registry
def _op_isspacep(k: "Kernel", ins: Instr) -> Fn:
    space = ins.mods[0]
    w = writer(k, ins.args[0])
    r = reader(k, ins.args[1], TYPES["u64"])

    def f(st: "State", sel: Any) -> None:
        a = np.asarray(r(st, sel)).astype(np.uint64)
        sh = (a >= np.uint64(st.env.shared_window)) & \
            (a < np.uint64(st.env.shared_window + WINDOW_B))
        lo = (a >= np.uint64(st.env.local_window)) & \
            (a < np.uint64(st.env.local_window + WINDOW_B))
        res = {"shared": sh, "local": lo, "global": ~(sh | lo)}.get(space)
        if res is None:
            raise Unsupported(ins.opcode)
        w(st, sel, res)
    return f


def _build() -> dict[str, Callable[["Kernel", Instr], Fn]]:
    from runtime.drivers.mock.ptx import memory as m
    from runtime.drivers.mock.ptx import warp
    t: dict[str, Callable[["Kernel", Instr], Fn]] = {
        "add": _op_add, "sub": lambda k, i: _op_add(k, i, True), "mul": _op_mul,
        "mad": _op_mad, "fma": _op_fma, "div": _op_div, "rem": _op_rem,
        "min": lambda k, i: _op_minmax(k, i, False), "max": lambda k, i: _op_minmax(k, i, True),
        "abs": lambda k, i: _op_abs_neg(k, i, False), "neg": lambda k, i: _op_abs_neg(k, i, True),
        "sqrt": _op_unary_float, "rsqrt": _op_unary_float, "rcp": _op_unary_float,
        "ex2": _op_unary_float, "lg2": _op_unary_float, "sin": _op_unary_float,
        "cos": _op_unary_float, "tanh": _op_unary_float, "copysign": _op_copysign,
        "testp": _op_testp,
        "shl": lambda k, i: _op_shift(k, i, True), "shr": lambda k, i: _op_shift(k, i, False),
        "and": _op_logic, "or": _op_logic, "xor": _op_logic, "not": _op_not, "cnot": _op_cnot,
        "popc": _op_popc, "clz": _op_clz, "bfind": _op_bfind, "brev": _op_brev, "bfe": _op_bfe,
        "bfi": _op_bfi, "prmt": _op_prmt, "lop3": _op_lop3, "shf": _op_shf,
        "setp": _op_setp, "set": _op_set, "selp": _op_selp, "slct": _op_slct,
        "mov": _op_mov, "cvt": _op_cvt, "cvta": _op_cvta, "isspacep": _op_isspacep,
        "ld": m.op_ld, "ldu": m.op_ld, "st": m.op_st, "atom": m.op_atom, "red": m.op_atom,
        "membar": lambda k, i: _nop, "fence": lambda k, i: _nop,
        # programmatic dependent launch: the mock starts a grid only once its predecessor has
        # completed, so the wait has nothing to wait for and the trigger nothing to start early
        "griddepcontrol": _op_griddepcontrol,
        "prefetch": lambda k, i: _nop, "prefetchu": lambda k, i: _nop,
        "discard": lambda k, i: _nop, "createpolicy": m.op_createpolicy,
        "shfl": warp.op_shfl, "vote": warp.op_vote, "redux": warp.op_redux,
        "activemask": warp.op_activemask, "match": warp.op_match,
        "nanosleep": lambda k, i: _nop, "sad": _op_sad, "mul24": _op_mul24,
        "mad24": _op_mul24, "dp4a": _op_dp, "dp2a": _op_dp,
        "mma": tensor.op_mma, "ldmatrix": tensor.op_ldmatrix, "cp": m.op_cp,
    }
    return t


_OPS: dict[str, Callable[["Kernel", Instr], Fn]] = {}   # filled on first use (a cache)


def _op_griddepcontrol(k: "Kernel", ins: Instr) -> Fn:
    if ins.mods[:1] not in (("wait",), ("launch_dependents",)) or ins.args:
        raise Unsupported(f"{ins.opcode} (only griddepcontrol.wait and .launch_dependents)")
    return _nop


def ops_table() -> dict[str, Callable[["Kernel", Instr], Fn]]:
    """The opcode table (first opcode word -> compiler)."""
    if not _OPS:
        _OPS.update(_build())
    return _OPS
