"""Warp-level PTX: shfl.sync, vote.sync, redux.sync, activemask, match.sync.

A warp is 32 consecutive threads of a CTA (by linear thread index). The threads that execute the
instruction together are the selected ones; a source lane outside the CTA gives the reading
thread its own value, as PTX specifies for lanes beyond the clamp.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from runtime.drivers.mock.ptx.ops import Fn, Unsupported, _type, reader, writer
from runtime.drivers.mock.ptx.parse import Instr
from runtime.drivers.mock.ptx.types import TYPES

if TYPE_CHECKING:
    from runtime.drivers.mock.ptx.execute import Kernel, State


def _full(k: "Kernel", o: Any, t: Any) -> Any:
    """Reads an operand for every thread of the batch (a shuffle reads other lanes' values)."""
    r = reader(k, o, t)
    return lambda st: np.broadcast_to(np.asarray(r(st, slice(None))), (st.n,))


def op_shfl(k: "Kernel", ins: Instr) -> Fn:
    mode = next((m for m in ins.mods if m in ("up", "down", "bfly", "idx")), None)
    if mode is None or "sync" not in ins.mods:
        raise Unsupported(f"{ins.opcode} (only shfl.sync.up/down/bfly/idx)")
    t = TYPES["b32"]
    dst = ins.args[0]
    dests = dst.elems if dst.kind == "vec" else (dst,)
    wd = writer(k, dests[0])
    wp = writer(k, dests[1]) if len(dests) > 1 else None
    ra = _full(k, ins.args[1], t)
    u32 = TYPES["u32"]
    rb, rc = reader(k, ins.args[2], u32), reader(k, ins.args[3], u32)

    def f(st: "State", sel: Any) -> None:
        idx = st.index(sel)
        lane = st.lane[sel].astype(np.int64)
        b = np.asarray(rb(st, sel)).astype(np.int64) & 0x1F
        c = np.asarray(rc(st, sel)).astype(np.int64)
        cval, segmask = c & 0x1F, (c >> 8) & 0x1F
        min_lane = lane & segmask
        max_lane = min_lane | (cval & ~segmask)
        if mode == "up":
            j = lane - b
            ok = j >= max_lane
        elif mode == "down":
            j = lane + b
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            ok = j <= max_lane
        else:
            j = min_lane | (b & ~segmask)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = st.warp_base[idx] + j
        # lanes past the end of the CTA do not exist: the thread keeps its own value
        cta_end = (st.cta_local[idx] + 1) * st.bt
        inside = src < cta_end
        src = np.where(inside, src, idx)
        a = ra(st)
        wd(st, sel, a[src])
        if wp is not None:
            wp(st, sel, ok & inside)
    return f


def _per_warp(st: "State", sel: Any, values: np.ndarray, fill: Any, reduce: Any) -> np.ndarray:
    """Reduces `values` (one per selected thread) over the selected threads of each warp;
    returns each selected thread's warp result."""
    idx = st.index(sel)
    warp = st.warp_base[idx] // 1
    uw, inv = np.unique(warp, return_inverse=True)
    acc = np.full(len(uw), fill, dtype=values.dtype)
    reduce.at(acc, inv, values)
    return acc[inv]


def op_vote(k: "Kernel", ins: Instr) -> Fn:
    mode = next((m for m in ins.mods if m in ("all", "any", "uni", "ballot")), None)
    if mode is None:
        raise Unsupported(ins.opcode)
    w = writer(k, ins.args[0])
    rp = reader(k, ins.args[1], TYPES["pred"])

    def f(st: "State", sel: Any) -> None:
        p = np.broadcast_to(np.asarray(rp(st, sel), np.bool_), (len(st.index(sel)),))
        if mode == "ballot":
            bits = np.where(p, np.uint32(1) << st.lane[sel].astype(np.uint32), np.uint32(0))
            w(st, sel, _per_warp(st, sel, bits.astype(np.uint32), np.uint32(0), np.bitwise_or))
            return
        cnt = _per_warp(st, sel, p.astype(np.int64), 0, np.add)
        tot = _per_warp(st, sel, np.ones(len(p), np.int64), 0, np.add)
        if mode == "all":
            w(st, sel, cnt == tot)
        elif mode == "any":
            w(st, sel, cnt > 0)
        else:
            w(st, sel, (cnt == 0) | (cnt == tot))
    return f


def op_activemask(k: "Kernel", ins: Instr) -> Fn:
    w = writer(k, ins.args[0])

    def f(st: "State", sel: Any) -> None:
        bits = np.uint32(1) << st.lane[sel].astype(np.uint32)
        w(st, sel, _per_warp(st, sel, bits.astype(np.uint32), np.uint32(0), np.bitwise_or))
    return f


def op_redux(k: "Kernel", ins: Instr) -> Fn:
    op = next((m for m in ins.mods if m in ("add", "min", "max", "and", "or", "xor")), None)
    t = _type(ins)
    if op is None or t.kind == "f":
        raise Unsupported(f"{ins.opcode} (float redux is sm_100a)")
    w = writer(k, ins.args[0])
    ra = reader(k, ins.args[1], t)
    info = np.iinfo(t.dtype)
    red, fill = {"add": (np.add, 0), "min": (np.minimum, info.max), "max": (np.maximum, info.min),
                 "and": (np.bitwise_and, -1 if t.kind == "s" else info.max),
                 "or": (np.bitwise_or, 0), "xor": (np.bitwise_xor, 0)}[op]

    def f(st: "State", sel: Any) -> None:
        v = np.broadcast_to(np.asarray(ra(st, sel), t.dtype), (len(st.index(sel)),)).copy()
        w(st, sel, _per_warp(st, sel, v, t.dtype.type(fill), red).astype(t.dtype))
    return f


def op_match(k: "Kernel", ins: Instr) -> Fn:
    mode = next((m for m in ins.mods if m in ("any", "all")), None)
    t = _type(ins)
    if mode != "any":
        raise Unsupported(ins.opcode)
    w = writer(k, ins.args[0])
    ra = reader(k, ins.args[1], t)

    def f(st: "State", sel: Any) -> None:
        idx = st.index(sel)
        v = np.broadcast_to(np.asarray(ra(st, sel)), (len(idx),))
        warp = st.warp_base[idx]
        lane_bit = np.uint32(1) << st.lane[sel].astype(np.uint32)
        out = np.zeros(len(idx), np.uint32)
        for j in range(len(idx)):
            same = (warp == warp[j]) & (v == v[j])
            out[j] = np.bitwise_or.reduce(lane_bit[same])
        w(st, sel, out)
    return f
