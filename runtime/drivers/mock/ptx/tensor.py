"""Tensor-core PTX of sm_80 (what Triton's `tl.dot` emits below Hopper's warpgroup path):
`mma.sync.aligned` (m16n8k16 and m16n8k8, f16/bf16 inputs, f32 or f16 accumulators; m16n8k8
tf32) and `ldmatrix.sync.aligned` (x1/x2/x4, optionally transposed).

Both are warp-wide: every lane of the warp must execute them together (a fault otherwise). The
fragment layouts are the PTX ISA's: in a warp, lane = 4 * group + t; an m16n8k16 A fragment holds
rows group and group + 8, columns 2t, 2t + 1 and 2t + 8, 2t + 9; B holds rows 2t, 2t + 1, 2t + 8,
2t + 9 of column group; C/D rows group and group + 8, columns 2t, 2t + 1. Products are summed in
float64 and rounded once to the accumulator type (the hardware's order of additions is not
specified, so results may differ from a GPU in the last bit).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from runtime.drivers.mock.ptx.parse import Instr
from runtime.drivers.mock.ptx.types import TYPES, bf16_to_f32, f32_to_bf16

if TYPE_CHECKING:
    from runtime.drivers.mock.ptx.execute import Kernel, State
    from runtime.drivers.mock.ptx.ops import Fn

_LANE = np.arange(32)
_G = _LANE >> 2
_T = _LANE & 3


def _whole_warps(st: "State", ins: Instr, sel: Any) -> np.ndarray:
    """The selected threads as (warps, 32) thread indices; faults unless they are whole warps."""
    from runtime.drivers.mock.ptx.execute import PtxFault
    idx = st.index(sel)
    n = len(idx)
    ok = n % 32 == 0 and bool(np.all(st.lane[idx] == (np.arange(n) % 32)))
    if ok:
        grid = idx.reshape(-1, 32)
        ok = bool(np.all(grid - grid[:, :1] == _LANE))
    if not ok:
        raise PtxFault(f"{st.kern.name}: line {ins.line} ({ins.text}): a warp-wide instruction "
                       f"executed by part of a warp ({st.thread_name(int(idx[0]))})")
    return idx.reshape(-1, 32)


def _tf32(v: np.ndarray) -> np.ndarray:
    """tf32 operands: the float32 bits with the 13 low mantissa bits ignored."""
    return (v.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def _halves(v: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The two 16-bit halves of packed registers as float32 (low, high)."""
    v = v.astype(np.uint32)
    lo, hi = (v & 0xFFFF).astype(np.uint16), (v >> 16).astype(np.uint16)
    if kind == "bf16":
        return bf16_to_f32(lo), bf16_to_f32(hi)
    return lo.view(np.float16).astype(np.float32), hi.view(np.float16).astype(np.float32)


def _pack(lo: np.ndarray, hi: np.ndarray, kind: str) -> np.ndarray:
    if kind == "bf16":
        a, b = f32_to_bf16(lo), f32_to_bf16(hi)
    else:
        a = lo.astype(np.float16).view(np.uint16)
        b = hi.astype(np.float16).view(np.uint16)
    return a.astype(np.uint32) | (b.astype(np.uint32) << 16)


def op_mma(k: "Kernel", ins: Instr) -> "Fn":
    from runtime.drivers.mock.ptx.ops import Unsupported, reader, writer
    mods = ins.mods
    shape = next((m for m in mods if m.startswith("m") and "n" in m and "k" in m), "")
    if "sync" not in mods or "aligned" not in mods or shape not in ("m16n8k16", "m16n8k8") \
            or "row" not in mods or "col" not in mods:
        raise Unsupported(f"{ins.opcode} (only mma.sync.aligned m16n8k16/m16n8k8 row.col)")
    if any(m in mods for m in ("satfinite", "sp")):
        raise Unsupported(ins.opcode)
    types = [m for m in mods if m in TYPES or m == "tf32"]
    if len(types) != 4:
        raise Unsupported(f"{ins.opcode}: expected D, A, B and C types")
    dt, at, bt, ct = types
    if at != bt or at not in ("f16", "bf16", "tf32") or dt not in ("f32", "f16") \
            or ct not in ("f32", "f16") or (at == "tf32" and shape != "m16n8k8") \
            or (at == "tf32" and dt != "f32"):
        raise Unsupported(f"{ins.opcode} (inputs f16/bf16/tf32, accumulators f32/f16)")
    kdim = 16 if shape == "m16n8k16" else 8
    d, a, b, c = ins.args
    b32 = TYPES["b32"]
    na = {("f16", 16): 4, ("bf16", 16): 4, ("f16", 8): 2, ("bf16", 8): 2, ("tf32", 8): 4}[
        (at, kdim)]
    nb = na // 2
    ncd = 4 if dt == "f32" else 2
    for o, n in ((d, ncd), (a, na), (b, nb), (c, 4 if ct == "f32" else 2)):
        if o.kind != "vec" or len(o.elems) != n:
            raise Unsupported(f"{ins.opcode}: fragment of {len(o.elems)} registers, expected {n}")
    ra = [reader(k, e, b32) for e in a.elems]
    rb = [reader(k, e, b32) for e in b.elems]
    rc = [reader(k, e, b32) for e in c.elems]
    wd = [writer(k, e) for e in d.elems]

    def frag_a(regs: list[np.ndarray], w: int) -> np.ndarray:
        m = np.zeros((w, 16, kdim), np.float64)
        if at == "tf32":   # one element per register: rows g, g+8; cols t, t+4
            f = [_tf32(r) for r in regs]
            m[:, _G, _T], m[:, _G + 8, _T] = f[0], f[1]
            m[:, _G, _T + 4], m[:, _G + 8, _T + 4] = f[2], f[3]
            return m
        for i, r in enumerate(regs):
            lo, hi = _halves(r, at)
            row = _G + 8 * (i & 1)
            col = 2 * _T + 8 * (i >> 1)
            m[:, row, col], m[:, row, col + 1] = lo, hi
        return m

    def frag_b(regs: list[np.ndarray], w: int) -> np.ndarray:
        m = np.zeros((w, kdim, 8), np.float64)
        if at == "tf32":
            f = [_tf32(r) for r in regs]
            m[:, _T, _G], m[:, _T + 4, _G] = f[0], f[1]
            return m
        for i, r in enumerate(regs):
            lo, hi = _halves(r, at)
            row = 2 * _T + 8 * i
            m[:, row, _G], m[:, row + 1, _G] = lo, hi
        return m

    def frag_c(regs: list[np.ndarray], w: int) -> np.ndarray:
        m = np.zeros((w, 16, 8), np.float64)
        if ct == "f32":
            f = [r.astype(np.uint32).view(np.float32).astype(np.float64) for r in regs]
            m[:, _G, 2 * _T], m[:, _G, 2 * _T + 1] = f[0], f[1]
            m[:, _G + 8, 2 * _T], m[:, _G + 8, 2 * _T + 1] = f[2], f[3]
            return m
        for i, r in enumerate(regs):
            lo, hi = _halves(r, "f16")
            m[:, _G + 8 * i, 2 * _T], m[:, _G + 8 * i, 2 * _T + 1] = lo, hi
        return m

    def run(st: "State", sel: Any) -> None:
        warps = _whole_warps(st, ins, sel)
        w = len(warps)
        flat = warps.reshape(-1)

        def regs(rs: list[Any]) -> list[np.ndarray]:
            return [np.broadcast_to(np.asarray(r(st, flat)), (len(flat),)).reshape(w, 32)
                    for r in rs]
        A, B, C = frag_a(regs(ra), w), frag_b(regs(rb), w), frag_c(regs(rc), w)
        D = np.matmul(A, B) + C
        if dt == "f32":
            D32 = D.astype(np.float32)
            outs = [D32[:, _G, 2 * _T], D32[:, _G, 2 * _T + 1], D32[:, _G + 8, 2 * _T],
                    D32[:, _G + 8, 2 * _T + 1]]
            for wi, v in zip(wd, outs):
                wi(st, flat, v.reshape(-1).view(np.uint32))
        else:
            for i, wi in enumerate(wd):
                r = _G + 8 * i
                wi(st, flat, _pack(D[:, r, 2 * _T], D[:, r, 2 * _T + 1], "f16").reshape(-1))
    return run


def op_ldmatrix(k: "Kernel", ins: Instr) -> "Fn":
    from runtime.drivers.mock.ptx.memory import load
    from runtime.drivers.mock.ptx.ops import Unsupported, writer
    mods = ins.mods
    if "sync" not in mods or "aligned" not in mods or "m8n8" not in mods or "b16" not in mods:
        raise Unsupported(f"{ins.opcode} (only ldmatrix.sync.aligned.m8n8 .b16)")
    count = next((int(m[1:]) for m in mods if m in ("x1", "x2", "x4")), 0)
    if not count:
        raise Unsupported(ins.opcode)
    trans = "trans" in mods
    dst = ins.args[0]
    elems = dst.elems if dst.kind == "vec" else (dst,)
    if len(elems) != count:
        raise Unsupported(f"{ins.opcode}: {len(elems)} destinations for .x{count}")
    ws = [writer(k, e) for e in elems]
    from runtime.drivers.mock.ptx.memory import address
    addr = address(k, ins.args[1], "shared")
    b16 = TYPES["b16"]

    def run(st: "State", sel: Any) -> None:
        warps = _whole_warps(st, ins, sel)
        w = len(warps)
        flat = warps.reshape(-1)
        a = np.broadcast_to(np.asarray(addr(st, flat), np.uint64), (len(flat),)).reshape(w, 32)
        # lanes 8i..8i+7 give the row addresses of matrix i
        providers = warps[:, :8 * count].reshape(-1)
        rows = load(st, ins, providers, "shared", a[:, :8 * count].reshape(-1), b16, 8)
        mat = np.stack(rows, axis=1).reshape(w, count, 8, 8)   # [warp, matrix, row, col]
        for i, wi in enumerate(ws):
            m = mat[:, i]
            if trans:
                lo, hi = m[:, 2 * _T, _G], m[:, 2 * _T + 1, _G]
            else:
                lo, hi = m[:, _G, 2 * _T], m[:, _G, 2 * _T + 1]
            wi(st, flat, (lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)).reshape(-1))
    return run
