"""wave64 forms of the instructions that address lanes across a wave64's two 32-lane rows.

A wave64 runs as two consecutive rows of the register planes (machine.Machine): lanes 0-31 in
the even row, 32-63 in the odd one. These replace the wave32 implementations in wave64 kernels
(RDNA3 ISA section 16 pseudo-code, with the lane index running to 63):
  v_readfirstlane_b32  the lowest active lane of the 64 (lane 0 when none is active)
  v_readlane_b32       lane S1[5:0]; v_writelane_b32 writes lane S1[5:0] whatever EXEC is
  v_mbcnt_lo/hi_u32    bits of S0 below the lane's position among lanes 0-31 / 32-63
  ds_bpermute_b32      each active lane reads VGPR data0 of lane ((addr + offset) >> 2) & 63
                       (0 from an inactive lane); ds_permute_b32: each active lane writes its
                       data0 to that lane (lanes nothing writes get 0)
  v_permlane64_b32     each active lane reads lane i ^ 32 of src0, active or not (the halves
                       swap; in wave32 it is a no-op)
ds_swizzle_b32 needs no wave64 form: its modes act within each 32-lane half (the bit-mask mode's
source lane keeps bit 5, the quad-permute mode stays in a quad), which is a row. ds_append and
ds_consume count the active lanes of both rows (ops_ds).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .decode import Inst
from .machine import WaveSet
from .operands import reader, vgpr_writer
from .ops_xlane import _scalar_src

Exec = Callable[[WaveSet], None]
u32 = np.uint32
_LANE = np.arange(32, dtype=u32)
_BELOW = ((np.uint64(1) << _LANE.astype(np.uint64)) - np.uint64(1)).astype(u32)


def _pairs(x: np.ndarray, n: int) -> np.ndarray:
    """[n, 32] rows → [n // 2, 64] waves."""
    return np.broadcast_to(x, (n, 32)).reshape(n // 2, 64)


def readfirstlane(inst: Inst) -> Exec:
    r0, dst = reader(inst.f["src0"], "b32", inst), inst.f["vdst"]

    def run(g: WaveSet) -> None:
        v, ex = _pairs(r0(g), g.n), _pairs(g.exec, g.n)
        first = np.where(ex.any(axis=1), np.argmax(ex, axis=1), 0)
        g.set_s(dst, np.repeat(v[np.arange(g.n // 2), first], 2))
    return run


def readlane(inst: Inst) -> Exec:
    r0, r1, dst = reader(inst.f["src0"], "b32", inst), _scalar_src(inst, "src1"), inst.f["vdst"]

    def run(g: WaveSet) -> None:
        v = _pairs(r0(g), g.n)
        lane = np.broadcast_to(r1(g), (g.n, 1))[::2, 0] & u32(63)
        g.set_s(dst, np.repeat(v[np.arange(g.n // 2), lane], 2))
    return run


def writelane(inst: Inst) -> Exec:
    r0, r1, dst = _scalar_src(inst, "src0"), _scalar_src(inst, "src1"), inst.f["vdst"]

    def run(g: WaveSet) -> None:
        val = np.broadcast_to(r0(g), (g.n, 1))
        lane = np.broadcast_to(r1(g), (g.n, 1))[:, 0] & u32(63)
        row_half = (g.wave_ids() & 1).astype(u32) * u32(32)   # lanes of this row: +0 / +32
        sel = (lane - row_half)[:, None] == _LANE[None, :]
        g.set_v_lanes(dst, np.broadcast_to(val, (g.n, 32)), sel)
    return run


def mbcnt(hi: bool) -> Callable[[Inst], Exec]:
    def make(inst: Inst) -> Exec:
        r0 = reader(inst.f["src0"], "u32", inst)
        r1 = reader(inst.f["src1"], "u32", inst)
        write = vgpr_writer(inst.f["vdst"], "u32")

        def run(g: WaveSet) -> None:
            odd = (g.wave_ids() & 1).astype(bool)[:, None]
            # lo: lanes 0-31 count the bits below them, lanes 32-63 all 32;
            # hi: lanes 0-31 count none, lanes 32-63 the bits below them.
            if hi:
                mask = np.where(odd, _BELOW[None, :], u32(0))
            else:
                mask = np.where(odd, u32(0xFFFFFFFF), _BELOW[None, :])
            bits = np.bitwise_count(np.broadcast_to(r0(g), (g.n, 32)) & mask).astype(u32)
            write(g, bits + r1(g))
        return run
    return make


def permute(inst: Inst) -> Exec:
    f = inst.f
    back = inst.name == "ds_bpermute_b32"
    off = u32(f["offset0"] | f["offset1"] << 8)
    addr_r, data_r, dst = f["addr"], f["data0"], f["vdst"]

    def run(g: WaveSet) -> None:
        n = g.n
        lane = _pairs(((g.v(addr_r) + off) >> u32(2)) & u32(63), n)
        ex = _pairs(g.exec, n)
        data = np.where(ex, _pairs(g.v(data_r), n), u32(0))
        waves = np.arange(n // 2)[:, None]
        if back:
            out = data[waves, lane]
        else:
            out = np.zeros((n // 2, 64), dtype=u32)
            ww = np.broadcast_to(waves, (n // 2, 64))
            out[ww[ex], lane[ex]] = data[ex]
        g.set_v(dst, out.reshape(n, 32))
    return run


def permlane64(inst: Inst) -> Exec:
    r0, dst = reader(inst.f["src0"], "b32", inst), inst.f["vdst"]

    def run(g: WaveSet) -> None:
        rows = np.broadcast_to(r0(g), (g.n, 32)).reshape(g.n // 2, 2, 32)
        # a copy: the destination may be the source, and every lane reads the old value
        g.set_v(dst, np.ascontiguousarray(rows[:, ::-1]).reshape(g.n, 32))
    return run


OPS: dict[str, Callable[[Inst], Exec]] = {
    "v_permlane64_b32": permlane64,
    "ds_bpermute_b32": permute, "ds_permute_b32": permute,
    "v_readfirstlane_b32": readfirstlane, "v_readlane_b32": readlane,
    "v_writelane_b32": writelane, "v_mbcnt_lo_u32_b32": mbcnt(False),
    "v_mbcnt_hi_u32_b32": mbcnt(True)}
