"""MUBUF (and MTBUF): buffer loads, stores and atomics through a buffer resource descriptor (V#).

The V# is four SGPRs (RDNA3 ISA section 9.1.5, "Buffer Resource"; field positions as Mesa's
sid.h names them for gfx11):
  dword0-1  BASE_ADDRESS [47:0], STRIDE [61:48], SWIZZLE_ENABLE [63:62]
  dword2    NUM_RECORDS
  dword3    DST_SEL_XYZW [11:0], FORMAT [17:12], INDEX_STRIDE [22:21], ADD_TID_ENABLE [23],
            OOB_SELECT [29:28], TYPE [31:30]
Per lane (section 9.1.6): index = VGPR (idxen), offset = VGPR (offen; the second VGPR when both)
+ the instruction's offset, buffer offset = index * stride + offset, address = base + soffset +
buffer offset. Range checking (section 9.1.8) excludes soffset and, by OOB_SELECT:
  0  index >= NUM_RECORDS or offset + size > stride  (structured, with offset)
  1  index >= NUM_RECORDS                              (structured)
  2  never out of range                                (disabled)
  3  buffer offset + size > NUM_RECORDS, unsigned       (raw: what Triton's buffer ops use)
An out-of-range load returns 0 and an out-of-range store or atomic does nothing; multi-dword
loads and stores check each dword on its own, atomics all or nothing. This is what Triton's
masking relies on: masked-off lanes get an offset past NUM_RECORDS. A V# whose FORMAT
(dword3 [17:12]) is 0 (INVALID) is unbound (section 9.6, "Unbound Resources"): every access is
out of range, whatever the instruction's own data size.

The format-converting forms (buffer_*_format_*, MTBUF tbuffer_*) and the loads into LDS live
in `ops_buffer_format`. Swizzled buffers (SWIZZLE_ENABLE, ADD_TID_ENABLE) and TFE raise a
KernelFault naming them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from runtime.drivers.mock.memory import PageFault

from . import atomics
from . import mem_lanes as ml
from .decode import Inst
from .errors import KernelFault
from .machine import WaveSet
from .operands import raw_reader
from .ops_mem import (_ATOMIC_DT, _SIZES, _fault, _transfer, atomic_exec, mem_op,
                      waves_share_an_address)

Exec = Callable[[WaveSet], None]
u32, u64 = np.uint32, np.uint64
_CACHE_OPS = ("buffer_gl0_inv", "buffer_gl1_inv", "buffer_wbinvl1")
OOB_STRUCTURED_OFFSET, OOB_STRUCTURED, OOB_DISABLED, OOB_RAW = 0, 1, 2, 3


@dataclass
class BufferLanes:
    """One MUBUF access's lanes: per-wave base + soffset, per-lane buffer offsets, and what the
    range check needs."""

    base: np.ndarray      # uint64 [n]: V# base + soffset
    boff: np.ndarray      # uint64 [n, 32]: index * stride + offset
    index: np.ndarray     # uint64 [n, 32]
    offset: np.ndarray    # uint64 [n, 32]
    stride: np.ndarray    # uint64 [n, 1]
    num: np.ndarray       # uint64 [n, 1]
    oob: np.ndarray       # uint64 [n, 1]
    bound: np.ndarray | None   # bool [n, 1]: FORMAT is not 0 (INVALID); None: every wave

    def in_range(self, at: int, size: int) -> np.ndarray:
        """bool [n, 32]: whether bytes [at, at+size) of each lane's element pass the check."""
        end = size + at
        raw = self.boff + u64(end) <= self.num
        struct_ = self.index < self.num
        with_off = struct_ & (self.offset + u64(end) <= self.stride)
        oob = self.oob
        ok = np.where(oob == OOB_RAW, raw,
                      np.where(oob == OOB_STRUCTURED, struct_,
                               np.where(oob == OOB_DISABLED, True, with_off)))
        return ok if self.bound is None else ok & self.bound


def _descriptor_lanes(inst: Inst) -> Callable[[WaveSet], BufferLanes]:
    f = inst.f
    srsrc, vaddr, imm = f["srsrc"], f["vaddr"], f["offset"]
    offen, idxen = bool(f["offen"]), bool(f["idxen"])
    soffset = raw_reader(f["soffset"], inst)

    def lanes(g: WaveSet) -> BufferLanes:
        w = [g.s(srsrc + i).astype(u64) for i in range(4)]
        live = g.exec.any(axis=1)
        swz, tid = (w[1] >> u64(30)) & u64(3), (w[3] >> u64(23)) & u64(1)
        if (live & ((swz != 0) | (tid != 0))).any():
            raise KernelFault("swizzled buffer (V# SWIZZLE_ENABLE or ADD_TID_ENABLE set) is not "
                              "modelled", address=inst.addr, instruction=str(inst))
        base = w[0] | ((w[1] & u64(0xFFFF)) << u64(32))
        soff = np.broadcast_to(soffset(g), (g.n, 1))[:, 0].astype(u64)
        zero = np.zeros((g.n, 32), dtype=u64)
        index = g.v(vaddr).astype(u64) if idxen else zero
        voff = g.v(vaddr + int(idxen)).astype(u64) if offen else zero
        offset = voff + u64(imm)
        stride = ((w[1] >> u64(16)) & u64(0x3FFF))[:, None]
        boff = index * stride + offset if idxen else offset
        bound = (w[3] >> u64(12)) & u64(0x3F) != 0
        return BufferLanes(base + soff, boff, index, offset, stride, w[2][:, None],
                           ((w[3] >> u64(28)) & u64(3))[:, None],
                           None if bound.all() else bound[:, None])
    return lanes


def _resolver(bl_of: Callable[[], BufferLanes], at: int, size: int, access: str
              ) -> Callable[[WaveSet], ml.Target]:
    """The group's (already narrowed) active lanes at base + buffer offset + at."""
    def resolve(g: WaveSet) -> ml.Target:
        bl = bl_of()
        mask = None if g.exec_full else g.exec
        base = bl.base
        off = bl.boff + u64(at)
        if base.min() == base.max():
            bnd = ml.lane_bounds(off, mask)
            if bnd is None:
                return ml.Target([], False)
            if bnd[1] < 1 << 32:
                t = ml.global_span(g.m.mem, int(base[0]), off.astype(u32), mask, size, access)
                if t is not None:
                    return t
        return ml.scattered(g.m.mem, ml.active(g, base[:, None] + off), size, access)
    return resolve


def compile_mubuf(inst: Inst) -> Exec:
    name, f = inst.name, inst.f
    if name in _CACHE_OPS:
        return lambda g: None  # cache invalidations: the mock has no caches
    if "format" in name or "_lds_" in name or inst.enc == "MTBUF":
        from . import ops_buffer_format as fmt  # it builds on this module's addressing
        return fmt.compile_load_lds(inst) if "_lds_" in name else fmt.compile_format(inst)
    if f["tfe"]:
        raise KernelFault("unsupported instruction (MUBUF with TFE is not modelled)",
                          address=inst.addr, instruction=str(inst))
    op = mem_op(name)
    lanes = _descriptor_lanes(inst)
    cur: list[BufferLanes] = []

    def bl() -> BufferLanes:
        return cur[-1]
    if op.kind.startswith("atomic_"):
        body = _atomic(inst, op.kind.removeprefix("atomic_"), op.typ, bl)
    elif op.kind in ("load", "store") and op.typ in _SIZES:
        body = _load_store(inst, op.kind, op.typ, op.d16, bl)
    else:
        raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))

    def run(g: WaveSet) -> None:
        if not g.active:
            return
        cur.append(lanes(g))
        try:
            body(g)
        finally:
            cur.pop()
    return run


def _load_store(inst: Inst, kind: str, typ: str, d16: str | None,
                bl: Callable[[], BufferLanes]) -> Exec:
    f = inst.f
    vdst = f["vdata"]  # MUBUF loads and stores both name their VGPRs vdata
    size = _SIZES[typ]
    access = "read" if kind == "load" else "write"
    if size < 4:
        pieces = [(0, size, _transfer(inst, kind, typ, vdst, vdst,
                                      _resolver(bl, 0, size, access), d16))]
    else:
        pieces = [(4 * j, 4, _transfer(inst, kind, "b32", vdst + j, vdst + j,
                                       _resolver(bl, 4 * j, 4, access)))
                  for j in range(size // 4)]
        whole = _transfer(inst, kind, typ, vdst, vdst, _resolver(bl, 0, size, access))

    def run(g: WaveSet) -> None:
        b = bl()
        oks = [g.exec & b.in_range(at, n) for at, n, _ in pieces]
        if len(pieces) > 1 and all(np.array_equal(oks[0], o) for o in oks[1:]):
            groups = [(oks[0], whole)]   # the usual case: the whole element in or out
        else:
            groups = [(ok, fn) for ok, (_, _, fn) in zip(oks, pieces)]
        for ok, fn in groups:
            if ok.any():
                with g.masked(ok):
                    fn(g)
        if kind == "load":
            # (every lane was resolved from the snapshot bl(), so a loaded address VGPR
            # cannot move the later pieces)
            _zero_out_of_range(g, inst, vdst, size, d16, oks)
    return run


def _zero_out_of_range(g: WaveSet, inst: Inst, vdst: int, size: int, d16: str | None,
                       oks: list[np.ndarray]) -> None:
    """Out-of-range loads return 0 (into the loaded half for the d16 forms)."""
    for j, ok in enumerate(oks):
        bad = g.exec & ~ok
        if not bad.any():
            continue
        with g.masked(bad):
            if d16 == "lo":
                g.set_v(vdst, g.v(vdst) & u32(0xFFFF0000))
            elif d16 == "hi":
                g.set_v(vdst, g.v(vdst) & u32(0xFFFF))
            else:
                g.set_v(vdst + j, np.zeros((g.n, 32), dtype=u32))


def _atomic(inst: Inst, op: str, typ: str, bl: Callable[[], BufferLanes]) -> Exec:
    dt = _ATOMIC_DT.get(typ)
    if dt is None or op not in atomics.OPS:
        raise KernelFault("unsupported atomic", address=inst.addr, instruction=str(inst))
    f = inst.f
    want = bool(f["glc"])  # GLC returns the pre-op value (ISA section 9.1.10)
    ndw = np.dtype(dt).itemsize // 4
    vdata = f["vdata"]
    size = ndw * 4
    rmw = atomic_exec(inst, op, dt, ndw, vdata, vdata, vdata + ndw if op == "cmpswap" else None,
                      want, _resolver(bl, 0, size, "atomic"))

    def run(g: WaveSet) -> None:
        ok = g.exec & bl().in_range(0, size)
        if ok.any():
            with g.masked(ok):
                try:
                    rmw(g)
                except PageFault as e:
                    raise _fault(inst, e) from None
        if want:
            _zero_out_of_range(g, inst, vdata, size, None, [ok] * ndw)
    return run


def buffer_contention(inst: Inst) -> Callable[[WaveSet], bool]:
    """For a returning buffer compare-and-swap: do waves race on an address?"""
    lanes = _descriptor_lanes(inst)

    def contended(g: WaveSet) -> bool:
        b = lanes(g)
        return waves_share_an_address(g, b.base[:, None] + b.boff)
    return contended
