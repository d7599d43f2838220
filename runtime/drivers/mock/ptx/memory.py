"""PTX memory instructions: ld/st (every state space, vectors), atom/red, cp.async.

An access first resolves each thread's address to a backing byte array and an offset there
(`resolve`): global and const addresses through the GPU's memory map (one region when the
instruction's addresses fall in one mapping, the common case), shared addresses into the CTA's
shared memory (bounded by the launch's shared memory size), local addresses into the thread's
local memory, parameters into constant bank 0, generic addresses by the shared and local windows
of constant bank 0. Every access is checked like the hardware checks it: outside a mapping or
past a window's size -> a fault naming the thread and address; not aligned to the access size
(the whole vector for .v2/.v4) -> a misaligned-address fault.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from runtime.drivers.mock.memory import PageFault
from runtime.drivers.mock.ptx.ops import (WINDOW_B, Fn, Unsupported, _type, reader, writer)
from runtime.drivers.mock.ptx.parse import Instr, Operand
from runtime.drivers.mock.ptx.types import TYPES, PtxType

if TYPE_CHECKING:
    from runtime.drivers.mock.ptx.execute import Kernel, State

SPACES = ("global", "shared", "local", "param", "const")


@dataclass
class Part:
    """The threads of an access (positions in the instruction's thread order) whose addresses lie
    in one byte array, with their byte offsets there."""

    pos: Any
    region: np.ndarray
    off: np.ndarray


def _space(ins: Instr) -> str:
    for m in ins.mods:
        if m in SPACES:
            return m
        if m.startswith("shared::"):
            return "shared"
    return "generic"


def _param_space(k: "Kernel", space: str, o: Operand) -> str:
    """A `.param` access to a call's argument or result (per-thread variables, inlined calls)
    is a local-memory access."""
    if space == "param" and o.kind == "addr" and o.base is not None and \
            o.base.kind == "sym" and o.base.name in k.body.locals:
        return "local"
    return space


def _vec(ins: Instr) -> int:
    for m in ins.mods:
        if m in ("v2", "v4", "v8"):
            return int(m[1:])
    return 1


def address(k: "Kernel", o: Operand, space: str) -> Callable[["State", Any], Any]:
    """Each thread's address (uint64) in `space` for an address operand `[base + off]`."""
    if o.kind != "addr":
        raise Unsupported(f"memory operand of kind {o.kind}")
    off = np.uint64(o.offset & 0xFFFFFFFFFFFFFFFF)
    b = o.base
    if b is None:
        return lambda st, sel: off
    if b.kind == "reg":
        r = b.reg
        return lambda st, sel: st.R[r][sel].astype(np.uint64) + off
    if b.kind == "sym":
        name = b.name
        if name in k.params:
            if space not in ("param", "generic"):
                raise Unsupported(f"parameter {name} in .{space} space")
            v = np.uint64(k.params[name].offset) + off
            return lambda st, sel: v
        if name in k.body.locals:
            v = np.uint64(k.body.locals[name][0]) + off
            return lambda st, sel: v
        if name in k.data_offs:
            d = k.data_offs[name]
            return lambda st, sel: np.uint64(st.env.data_va + d) + off
        return lambda st, sel: np.uint64(st.shared_offsets[name]) + off
    raise Unsupported(f"address base of kind {b.kind}")


def _fault(st: "State", ins: Instr, sel: Any, k: int, what: str, va: int) -> Exception:
    from runtime.drivers.mock.ptx.execute import PtxFault
    idx = st.index(sel)
    return PtxFault(f"{st.kern.name}: line {ins.line} ({ins.text}): {what} at address {va:#x} "
                    f"({st.thread_name(int(idx[k]))})", va)


def resolve(st: "State", ins: Instr, sel: Any, space: str, addrs: Any, nbytes: int,
            access: str) -> list[Part]:
    """Where each selected thread's access of `nbytes` at `addrs` lands (see the module
    docstring); raises a fault for the first thread whose access is invalid."""
    n = len(st.index(sel))
    a = np.broadcast_to(np.asarray(addrs, np.uint64), (n,))
    if space in ("global", "const", "generic") and nbytes > 1:
        mis = (a % np.uint64(nbytes)) != 0
        if mis.any():
            k = int(np.argmax(mis))
            raise _fault(st, ins, sel, k, f"misaligned {access} of {nbytes} B", int(a[k]))
    if space == "generic":
        env = st.env
        sh = (a >= np.uint64(env.shared_window)) & (a < np.uint64(env.shared_window + WINDOW_B))
        lo = (a >= np.uint64(env.local_window)) & (a < np.uint64(env.local_window + WINDOW_B))
        if not sh.any() and not lo.any():
            return resolve(st, ins, sel, "global", a, nbytes, access)
        parts: list[Part] = []
        idx = st.index(sel)
        for mask, sp, base in ((sh, "shared", env.shared_window), (lo, "local", env.local_window),
                               (~(sh | lo), "global", 0)):
            if not mask.any():
                continue
            pos = np.nonzero(mask)[0]
            for p in resolve(st, ins, idx[pos], sp, a[pos] - np.uint64(base), nbytes, access):
                parts.append(Part(pos[p.pos], p.region, p.off))
        return parts
    if space in ("global", "const"):
        return _resolve_global(st, ins, sel, a, nbytes, access)
    if space == "shared":
        limit = st.env.shared_B
        if nbytes > 1:
            mis = (a % np.uint64(nbytes)) != 0
            if mis.any():
                k = int(np.argmax(mis))
                raise _fault(st, ins, sel, k, f"misaligned shared {access} of {nbytes} B",
                             int(a[k]))
        bad = a + np.uint64(nbytes) > np.uint64(limit)
        if bad.any():
            k = int(np.argmax(bad))
            raise _fault(st, ins, sel, k, f"shared {access} of {nbytes} B outside the CTA's "
                         f"{limit} B of shared memory", int(a[k]))
        base = st.cta_local[sel] * limit
        return [Part(slice(None), st.shared, base + a.astype(np.int64))]
    if space == "local":
        limit = st.local_B
        bad = a + np.uint64(nbytes) > np.uint64(limit)
        if bad.any():
            k = int(np.argmax(bad))
            raise _fault(st, ins, sel, k, f"local {access} of {nbytes} B outside the thread's "
                         f"{limit} B of local memory", int(a[k]))
        base = st.gidx[sel] * limit
        return [Part(slice(None), st.local, base + a.astype(np.int64))]
    if space == "param":
        cb0 = st.cb0_array
        off = a.astype(np.int64) + st.env.param_base
        bad = off + nbytes > len(cb0)
        if bad.any():
            k = int(np.argmax(bad))
            raise _fault(st, ins, sel, k, f"parameter {access} past constant bank 0's "
                         f"{len(cb0)} B", int(a[k]))
        return [Part(slice(None), cb0, off)]
    raise Unsupported(f".{space} accesses")


def _resolve_global(st: "State", ins: Instr, sel: Any, a: np.ndarray, nbytes: int,
                    access: str) -> list[Part]:
    mem = st.env.mem
    lo, hi = int(a.min()), int(a.max()) + nbytes
    try:
        data, base = mem.find(lo, hi - lo, access)
        return [Part(slice(None), data, a.astype(np.int64) - lo + base)]
    except PageFault:
        pass
    try:
        which, offs = mem._locate(a, nbytes, access)
    except PageFault as e:
        # _locate names the first bad lane: the thread of that position in this access
        bad = np.ones(len(a), np.bool_)
        maps = mem.mappings()
        for m in maps:
            bad &= ~((a >= np.uint64(m.va)) & (a + np.uint64(nbytes) <= np.uint64(m.end)))
        k = int(np.argmax(bad)) if bad.any() else 0
        raise _fault(st, ins, sel, k, f"page fault: {access} of {nbytes} B is not mapped",
                     int(a[k])) from e
    maps = mem.mappings()
    parts = []
    for mi in np.unique(which):
        pos = np.nonzero(which == mi)[0]
        parts.append(Part(pos, maps[int(mi)].data, offs[pos]))
    return parts


def _elements(region: np.ndarray, dt: np.dtype) -> np.ndarray:
    usable = len(region) - len(region) % dt.itemsize
    return region[:usable].view(dt)


def load(st: "State", ins: Instr, sel: Any, space: str, addrs: Any, t: PtxType,
         n: int) -> list[np.ndarray]:
    """`n` consecutive elements of type `t` at each selected thread's address."""
    dt = np.dtype(t.udtype)
    size = dt.itemsize
    count = len(st.index(sel))
    parts = resolve(st, ins, sel, space, addrs, size * n, "read")
    if len(parts) == 1 and isinstance(parts[0].pos, slice):
        p = parts[0]
        if np.all(p.off % size == 0):
            el = _elements(p.region, dt)
            i0 = p.off // size
            return [el[i0 + j] for j in range(n)]
        raw = p.region[p.off[:, None] + np.arange(size * n)]
        v = np.ascontiguousarray(raw).view(dt).reshape(count, n)
        return [v[:, j] for j in range(n)]
    out = [np.zeros(count, dt) for _ in range(n)]
    for p in parts:
        raw = p.region[p.off[:, None] + np.arange(size * n)]
        v = np.ascontiguousarray(raw).view(dt).reshape(-1, n)
        for j in range(n):
            out[j][p.pos] = v[:, j]
    return out


def store(st: "State", ins: Instr, sel: Any, space: str, addrs: Any, t: PtxType,
          values: list[Any]) -> None:
    """Stores `values` (one array or scalar per vector element) at each thread's address; where
    threads store to the same place, the highest thread wins."""
    dt = np.dtype(t.udtype)
    size = dt.itemsize
    n = len(values)
    count = len(st.index(sel))
    if space == "param":
        raise Unsupported("st.param outside a function call")
    parts = resolve(st, ins, sel, space, addrs, size * n, "write")
    vals = [np.broadcast_to(np.asarray(v).view(dt) if np.asarray(v).dtype.itemsize == size
                            else np.asarray(v).astype(dt), (count,)) for v in values]
    for p in parts:
        if np.all(p.off % size == 0):
            el = _elements(p.region, dt)
            i0 = p.off // size
            for j in range(n):
                el[i0 + j] = vals[j][p.pos]
        else:
            stacked = np.ascontiguousarray(np.stack([v[p.pos] for v in vals], axis=1))
            p.region[p.off[:, None] + np.arange(size * n)] = stacked.view(np.uint8) \
                .reshape(-1, size * n)


def _value_type(ins: Instr) -> PtxType:
    t = _type(ins)
    return t


def op_ld(k: "Kernel", ins: Instr) -> Fn:
    t = _value_type(ins)
    space = _space(ins)
    n = _vec(ins)
    dst = ins.args[0]
    elems = dst.elems if dst.kind == "vec" else (dst,)
    if len(elems) != n:
        raise Unsupported(f"{ins.opcode}: {len(elems)} destinations for a .v{n} access")
    ws = [writer(k, e) for e in elems]
    space = _param_space(k, space, ins.args[1])
    addr = address(k, ins.args[1], space)
    signed = t.kind == "s"
    sdt = np.dtype(f"i{t.size}") if signed else None

    def f(st: "State", sel: Any) -> None:
        vals = load(st, ins, sel, space, addr(st, sel), t, n)
        for w, v in zip(ws, vals):
            w(st, sel, v.view(sdt) if sdt is not None else v)
    return f


def op_st(k: "Kernel", ins: Instr) -> Fn:
    t = _value_type(ins)
    space = _space(ins)
    n = _vec(ins)
    src = ins.args[1]
    elems = src.elems if src.kind == "vec" else (src,)
    if len(elems) != n:
        raise Unsupported(f"{ins.opcode}: {len(elems)} sources for a .v{n} access")
    store_t = TYPES[f"b{8 * t.size}"] if t.size in (1, 2, 4, 8) else t
    rs = [reader(k, e, store_t) for e in elems]
    space = _param_space(k, space, ins.args[0])
    addr = address(k, ins.args[0], space)

    def f(st: "State", sel: Any) -> None:
        store(st, ins, sel, space, addr(st, sel), t, [r(st, sel) for r in rs])
    return f


_ATOM_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas")


def op_atom(k: "Kernel", ins: Instr) -> Fn:
    t = _type(ins)
    space = _space(ins)
    op = next((m for m in ins.mods if m in _ATOM_OPS), None)
    if op is None:
        raise Unsupported(ins.opcode)
    if _vec(ins) != 1 or t.kind in ("x2",) or t.size not in (2, 4, 8):
        raise Unsupported(f"{ins.opcode} (vector or packed atomics)")
    is_red = ins.op == "red"
    args = ins.args
    w = None if is_red else writer(k, args[0])
    ai = 0 if is_red else 1
    addr = address(k, args[ai], space)
    rb = reader(k, args[ai + 1], t)
    rc = reader(k, args[ai + 2], t) if op == "cas" else None
    dt = t.dtype

    def apply(old: np.ndarray, b: np.ndarray, c: Any) -> np.ndarray:
        if op == "add":
            if t.kind == "bf":
                from runtime.drivers.mock.ptx.types import bf16_to_f32, f32_to_bf16
                return f32_to_bf16(bf16_to_f32(old) + bf16_to_f32(b))
            return (old + b).astype(dt)
        if op == "min":
            return np.fmin(old, b) if t.kind == "f" else np.minimum(old, b)
        if op == "max":
            return np.fmax(old, b) if t.kind == "f" else np.maximum(old, b)
        if op == "and":
            return old & b
        if op == "or":
            return old | b
        if op == "xor":
            return old ^ b
        if op == "exch":
            return np.broadcast_to(b, old.shape).copy()
        if op == "inc":
            return np.where(old >= b, dt.type(0), old + dt.type(1)).astype(dt)
        if op == "dec":
            return np.where((old == 0) | (old > b), b, old - dt.type(1)).astype(dt)
        return np.where(old == b, c, old).astype(dt)  # cas

    def f(st: "State", sel: Any) -> None:
        count = len(st.index(sel))
        a = np.broadcast_to(np.asarray(addr(st, sel), np.uint64), (count,))
        b = np.broadcast_to(np.asarray(rb(st, sel), dt), (count,))
        c = np.broadcast_to(np.asarray(rc(st, sel), dt), (count,)) if rc is not None else None
        parts = resolve(st, ins, sel, space, a, t.size, "atomic")
        olds = np.zeros(count, dt)
        for p in parts:
            el = _elements(p.region, np.dtype(t.udtype)).view(dt)
            idx = p.off // t.size
            pb = b[p.pos]
            pc = c[p.pos] if c is not None else None
            if len(np.unique(idx)) == len(idx):
                old = el[idx].copy()
                el[idx] = apply(old, pb, pc)
            else:
                old = _contended(el, idx, pb, pc, apply, op if t.kind != "bf" else "")
            olds[p.pos] = old
        if w is not None:
            w(st, sel, olds)
    return f


_ACCUMULATE = {"add": np.add, "min": np.fmin, "max": np.fmax, "and": np.bitwise_and,
               "or": np.bitwise_or, "xor": np.bitwise_xor}


def _contended(el: np.ndarray, idx: np.ndarray, b: np.ndarray, c: np.ndarray | None,
               apply: Callable[..., np.ndarray], op: str = "") -> np.ndarray:
    """Atomics of threads that share addresses, applied in thread order (each thread sees the
    result of the ones before it): an accumulation per address where the operation is one, a
    walk from success to success for compare-and-swap, a plain loop otherwise."""
    old = np.empty(len(idx), el.dtype)
    order = np.argsort(idx, kind="stable")
    sidx = idx[order]
    starts = np.flatnonzero(np.r_[True, sidx[1:] != sidx[:-1]])
    ends = np.r_[starts[1:], len(sidx)]
    for s0, e0 in zip(starts, ends):
        pos = order[s0:e0]
        i = int(sidx[s0])
        v0 = el[i:i + 1].copy()
        bb = b[pos]
        if op in _ACCUMULATE:
            seq = np.concatenate([v0, bb.astype(el.dtype)])
            ufunc = _ACCUMULATE[op]
            if el.dtype.kind in "iu" and op in ("min", "max"):
                ufunc = np.minimum if op == "min" else np.maximum
            acc = ufunc.accumulate(seq, dtype=el.dtype)
            old[pos] = acc[:-1]
            el[i] = acc[-1]
        elif op == "exch":
            old[pos] = np.concatenate([v0, bb[:-1]])
            el[i] = bb[-1]
        elif op == "cas" and c is not None:
            cc = c[pos]
            cur, j = v0[0], 0
            while j < len(pos):
                hit = np.flatnonzero(bb[j:] == cur)
                if len(hit) == 0:
                    old[pos[j:]] = cur
                    break
                k = j + int(hit[0])
                old[pos[j:k + 1]] = cur
                cur = cc[k]
                j = k + 1
            el[i] = cur
        else:
            cur_arr = v0
            for j, p in enumerate(pos):
                old[p] = cur_arr[0]
                cur_arr = apply(cur_arr, bb[j:j + 1], c[pos][j:j + 1] if c is not None else None)
            el[i] = cur_arr[0]
    return old


def op_createpolicy(k: "Kernel", ins: Instr) -> Fn:
    w = writer(k, ins.args[0])
    return lambda st, sel: w(st, sel, np.uint64(0))


def op_cp(k: "Kernel", ins: Instr) -> Fn:
    """cp.async: the copy happens at once (a later wait_group finds it done, which is one valid
    timing); commit_group and wait_group are then no-ops."""
    mods = ins.mods
    if not mods or mods[0] != "async":
        raise Unsupported(ins.opcode)
    if "bulk" in mods:
        raise Unsupported(f"{ins.opcode} (bulk copies / TMA, sm_90)")
    if "commit_group" in mods or "wait_group" in mods or "wait_all" in mods:
        return lambda st, sel: None
    if "mbarrier" in mods:
        raise Unsupported(ins.opcode)
    dst_addr = address(k, ins.args[0], "shared")
    src_addr = address(k, ins.args[1], "global")
    size_o = ins.args[2]
    if size_o.kind != "imm":
        raise Unsupported(f"{ins.opcode} with a non-constant size")
    size = size_o.value
    src_size = reader(k, ins.args[3], TYPES["u32"]) if len(ins.args) > 3 and \
        ins.args[3].kind in ("reg", "imm") else None
    ut = TYPES[{4: "b32", 8: "b64", 16: "b32"}[size]]
    n = {4: 1, 8: 1, 16: 4}[size]

    def f(st: "State", sel: Any) -> None:
        count = len(st.index(sel))
        if src_size is not None:
            ss = np.broadcast_to(np.asarray(src_size(st, sel)), (count,))
        else:
            ss = np.full(count, size)
        vals: list[Any]
        read = ss > 0
        if read.all():
            vals = load(st, ins, sel, "global", src_addr(st, sel), ut, n)
        else:
            vals = [np.zeros(count, ut.udtype) for _ in range(n)]
            if read.any():
                sub = st.index(sel)[read]
                a = np.broadcast_to(np.asarray(src_addr(st, sel), np.uint64), (count,))[read]
                got = load(st, ins, sub, "global", a, ut, n)
                for j in range(n):
                    vals[j][read] = got[j]
        # zero-fill beyond src-size (in bytes)
        if (ss < size).any():
            for j in range(n):
                lo = j * ut.size
                keep = ss > lo
                vals[j] = np.where(keep, vals[j], 0).astype(ut.udtype)
        store(st, ins, sel, "shared", dst_addr(st, sel), ut, vals)
    return f


__all__ = ["load", "op_atom", "op_cp", "op_ld", "op_st", "resolve", "store"]
