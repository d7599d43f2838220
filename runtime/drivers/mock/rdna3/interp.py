"""The vectorised executor: all waves of a dispatch run together, grouped by program counter.

A dispatch is run in batches of whole workgroups (at most BATCH_MAX_WAVES waves, so a batch's
registers stay in cache, and bounded by the memory their registers and LDS need). Within a batch
every wave starts in one wave set (the waves at one program counter, stepped together) at the
entry point. The scheduler always runs the wave set with the lowest program counter, one
instruction at a time over all its waves:
  * a branch whose condition differs between the wave set's waves splits it in two, except that a
    forward s_cbranch_execz over a block that only does EXEC-masked work lets the waves with an
    empty EXEC come along when most waves execute the block (they change nothing there, and a
    split plus a merge costs more than masked work);
  * wave sets that arrive at the same program counter merge again (structured code from LLVM
    reconverges at the lowest pending address, so lowest-pc-first brings them together);
  * a wave set at `s_barrier` waits; when no wave set can run, every waiting wave set passes its
    barrier (all waves of each workgroup have then arrived or ended, which is the barrier's
    condition);
  * `s_endpgm` retires a wave set.
Lane divergence inside a wave is EXEC masking, handled by the instructions themselves.

ExecStats counts every instruction a wave set executes once per wave of the wave set (so waves
carried through a masked block with an empty EXEC count too) and once per lane active in EXEC.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from runtime.drivers.mock.memory import MockMemory, PageFault

from .decode import EXEC_LO, NULL, VGPR0, Inst, decode_one
from .errors import DispatchRecord, ExecStats, KernelFault, PageFaultError
from .liveness import dead_mask_writes, masked_block
from . import fast_valu
from .machine import ALL, Planes, WaveSet, Machine, ScratchSetup, merge, pack_lanes
from .ops_ds import compile_ds
from . import gws as gws_unit
from . import ops_wave64 as wave64_ops
from .ops_buffer import buffer_contention, compile_mubuf
from .ops_mem import (compile_flat, compile_smem, fadd_retry_rounds, flat_contention,
                      retry_tail)
from .ops_salu import ATOMIC, BARRIER, BRANCH, END, NEXT, NOP, WAIT, Step, compile_salu
from .ops_valu import compile_valu

MAX_CODE_BYTES = 1 << 20
BATCH_MEMORY_B = 512 << 20     # registers + LDS of one batch of workgroups
BATCH_MAX_WAVES = 1 << 12  # ~128K lanes: a batch's registers stay in cache


@dataclass
class Program:
    """Decoded code: instructions, their slots, address → index.

    Decoding starts at the entry point and runs to the first s_code_end. Code a jump or call
    reaches outside what is decoded (a function the linker placed before the kernel) is decoded
    on first use from that address on (`locate`) and appended as a further region; each region
    ends in a slot that faults when execution runs off its end, or that continues at the known
    instruction the region ran into. Within a region, indices follow addresses."""

    base: int
    raw: bytes
    insts: list[Inst]
    steps: list[Step | None]
    index: dict[int, int]
    dead: set[int]
    wave64: bool = False
    # (address, bytes) of every decoded region after the entry's: revalidated with it
    more: list[tuple[int, bytes]] = field(default_factory=list)
    # The straight-line run starting at each slot, built on first use (None: not yet)
    blocks: list[Block | None] = field(default_factory=list)
    # The entry is s_endpgm: every wave ends at its first instruction (`Dispatch`)
    ends_at_entry: bool = False

    def block(self, i: int) -> Block:
        """The run of NEXT steps starting at slot i (NO_BLOCK where it would be one step or
        none): the scheduler runs it in one go. It ends before the first slot that is not a
        NEXT step or does not compile (which faults only if it is reached, as on its own)."""
        if len(self.blocks) < len(self.steps):
            self.blocks.extend([None] * (len(self.steps) - len(self.blocks)))
        body: list[tuple[Callable[[WaveSet], Any], int, Step]] = []
        j = i
        n = len(self.insts)
        while j < n:
            try:
                s = self.steps[j] or self.step(j)
            except KernelFault:
                break
            if s.kind != NEXT:
                break
            assert s.fn is not None   # NEXT steps always carry one
            body.append((s.fn, s.skip, s))
            j += 1 + s.skip
        binders = tuple(fast_valu.binder(fn) for fn, _, _ in body)
        blk = Block(tuple(body), j - i, j, binders if any(binders) else None) \
            if len(body) > 1 else NO_BLOCK
        self.blocks[i] = blk
        return blk

    def step(self, i: int) -> Step:
        s = self.steps[i]
        if s is None:
            inst = self.insts[i]
            try:
                s = self.steps[i] = _compile(inst, i in self.dead, self)
            except KernelFault:
                raise
            except (KeyError, ValueError, IndexError, TypeError) as e:
                raise KernelFault(f"unsupported instruction ({type(e).__name__}: {e})",
                                  address=inst.addr, instruction=str(inst), cause=e) from None
            if s.kind == NEXT:
                s.skip = self._nops_after(i)
        return s

    def _nops_after(self, i: int) -> int:
        """How many NOP slots follow slot i (compiled now; an instruction that does not compile
        ends the run, and faults only if it is reached)."""
        j = i + 1
        while j < len(self.insts):
            s = self.steps[j]
            if s is None:
                if self.insts[j].name.startswith("<"):
                    break
                try:
                    s = _compile(self.insts[j], j in self.dead, self)
                except (KernelFault, KeyError, ValueError, IndexError, TypeError):
                    break
                if s.kind == NOP:
                    # (only NOPs are kept: another step gets its own NOP count from `step`)
                    self.steps[j] = s
            if s.kind != NOP:
                break
            j += 1
        return j - i - 1

    def locate(self, addr: int, mem: MockMemory) -> int | None:
        """The index of the instruction at `addr`, decoding the code there if it is outside
        what is decoded so far; None where `addr` is not mapped or inside an instruction."""
        idx = self.index.get(addr)
        if idx is not None or not self.base - MAX_CODE_BYTES <= addr < self.base + MAX_CODE_BYTES:
            return idx
        if any(a <= addr < a + len(r) for a, r in [(self.base, self.raw), *self.more]):
            return None   # inside a decoded instruction
        try:
            data, off = mem.find(addr, 4, "instruction fetch")
        except PageFault:
            return None
        window = data[off:off + MAX_CODE_BYTES].tobytes()
        insts: list[Inst] = []
        pos, joins = 0, None
        while pos < len(window):
            joins = self.index.get(addr + pos)
            if joins is not None:
                break
            inst = decode_one(window, pos, addr + pos)
            if inst.name == "s_code_end":
                break
            insts.append(inst)
            pos += inst.size
        if not insts:
            return None
        if not self.more:
            self._append_end(self.base + len(self.raw), None)   # the entry region's end
        first = len(self.insts)
        self.insts.extend(insts)
        self.steps.extend([None] * len(insts))
        self.index.update({inst.addr: first + i for i, inst in enumerate(insts)})
        self.dead.update(first + i for i in dead_mask_writes(insts))
        self.more.append((addr, window[:pos]))
        self._append_end(addr + pos, joins)
        return first

    def _append_end(self, addr: int, joins: int | None) -> None:
        """The slot after a region: continue at instruction `joins`, or fault."""
        if joins is not None:
            end = Inst(addr, 0, "SOPP", -1, "<continues at a decoded instruction>")
            self.steps.append(Step(BRANCH, None, end, target=joins))
        else:
            end = Inst(addr, 0, "SOPP", -1, "<end of the decoded code>")

            def past_end(g: WaveSet) -> None:
                raise KernelFault("execution ran past the end of the program (no s_endpgm)",
                                  address=addr)
            self.steps.append(Step(NEXT, past_end, end))
        self.insts.append(end)


class Block(NamedTuple):
    """Straight-line code the scheduler runs without looking at each step: (fn, NOP slots
    after it, step) per instruction, the slots it covers (NOPs included), the slot after it."""

    body: tuple[tuple[Callable[[WaveSet], Any], int, Step], ...]
    n_slots: int
    end: int
    # per step, how to bind it to a wave set's planes (fast_valu.binder); None: none can be
    binders: tuple[fast_valu.Binder | None, ...] | None = None


# No block starts here (its end lies past any stop, so the scheduler never takes it)
NO_BLOCK = Block((), 0, 1 << 62)


# One step of a block bound to a wave set's planes: (fn, args, the step, whether fn(*args) is
# the bound form (else fn(g)), the slot after it, the block's slots through it)
BoundStep = tuple[Callable[..., Any], tuple[Any, ...], Step, bool, int, int]


def _bind(blk: Block, start: int, g: WaveSet, P: Planes) -> tuple[BoundStep, ...]:
    """The block's steps bound to P where they can be (their views looked up once; the VGPRs
    they write marked written now, as the run will write them)."""
    assert blk.binders is not None
    out: list[BoundStep] = []
    pc, slots = start, 0
    for (fn, skip, st), bind in zip(blk.body, blk.binders):
        pc += 1 + skip
        slots += 1 + skip
        out.append(_bound_step(fn, bind, st, pc, slots, g, P))
    return tuple(out)


def _bound_step(fn: Callable[[WaveSet], Any], bind: "fast_valu.Binder | None", st: Step,
                pc: int, slots: int, g: WaveSet, P: Planes) -> BoundStep:
    """One step bound to P by `bind` (its VGPRs marked written), or left as `fn` where `bind`
    is None or declines."""
    got = bind(g, P) if bind is not None else None
    if got is None:
        return (fn, (), st, False, pc, slots)
    f, args, dests = got
    P.dirty_v.update(dests)
    return (f, args, st, True, pc, slots)


def _compile(inst: Inst, mask_dead: bool, prog: Program) -> Step:
    """Builds an instruction's slot on first execution (unknown ones raise only if reached)."""
    enc = inst.enc
    if inst.name.startswith("<"):
        raise KernelFault(f"unknown instruction {inst.name}", address=inst.addr,
                          instruction=str(inst))
    if prog.wave64 and inst.name in wave64_ops.OPS:
        step = Step(NEXT, wave64_ops.OPS[inst.name](inst), inst)
        return step
    if prog.wave64 and (inst.name in WAVE64_REFUSED or "addtid" in inst.name):
        raise KernelFault("unsupported instruction in a wave64 kernel (it addresses lanes "
                          "across the wave's two halves; the interpreter runs wave64 as two "
                          "32-lane rows)", address=inst.addr, instruction=str(inst))
    if enc in ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP"):
        step = compile_salu(inst)
    elif enc in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOPD", "VOP3P"):
        step = Step(NEXT, compile_valu(inst, mask_dead), inst)
    elif enc == "SMEM":
        step = Step(NEXT, compile_smem(inst), inst)
    elif enc == "FLAT":
        if "cmpswap" in inst.name and inst.f["glc"]:
            tail = retry_tail(inst, _slots_after(prog, prog.index[inst.addr]))
            step = Step(ATOMIC, compile_flat(inst, tail), inst)
            step.contended = flat_contention(inst)
        else:
            step = Step(NEXT, compile_flat(inst), inst)
    elif enc == "DS":
        step = Step(NEXT, compile_ds(inst), inst)
        if inst.f["gds"] and inst.name in gws_unit.GWS_OPS:
            step.kind = WAIT   # may queue waves at a GWS resource
    elif enc in ("MUBUF", "MTBUF"):
        step = Step(NEXT, compile_mubuf(inst), inst)
        if "cmpswap" in inst.name and inst.f["glc"]:
            step.contended = buffer_contention(inst)
            step.kind = ATOMIC
    else:
        raise KernelFault(f"unsupported instruction encoding {enc}", address=inst.addr,
                          instruction=str(inst))
    if step.kind == BRANCH:
        if step.target not in prog.index:
            raise KernelFault(f"branch target {step.target:#x} is not an instruction of the "
                              "decoded program", address=inst.addr, instruction=str(inst))
        step.target = prog.index[step.target]
        here = prog.index[inst.addr]
        step.masked_skip = inst.name == "s_cbranch_execz" and \
            masked_block(prog.insts, here + 1, step.target)
    return step


def _slots_after(prog: Program, i: int, most: int = 16) -> Iterator[tuple[Inst, bool]]:
    """The instructions after slot i and whether each is a NOP slot (compiled to tell; the
    first that does not compile ends them)."""
    for j in range(i + 1, min(i + 1 + most, len(prog.insts))):
        try:
            kind = prog.step(j).kind
        except KernelFault:
            return
        yield prog.insts[j], kind == NOP


# Instructions whose result depends on lane numbers across the whole wave64 (not modelled:
# the two 32-lane rows of a wave64 are separate planes).
# (v_permlane16/x16, DPP and ds_swizzle act within 16- and 32-lane groups, so rows run them as
# they are; ds_append/ds_consume count both rows; readlane, readfirstlane, writelane, mbcnt,
# permlane64 and ds_(b)permute have wave64 forms in ops_wave64.)
WAVE64_REFUSED = frozenset({
    "v_movrels_b32", "v_movreld_b32", "v_movrelsd_b32", "v_movrelsd_2_b32"})


def decode_program(code: bytes, base: int) -> Program:
    """Decodes from the entry point up to the first s_code_end (or the end of the bytes)."""
    insts: list[Inst] = []
    pos = 0
    while pos < len(code):
        inst = decode_one(code, pos, base + pos)
        if inst.name == "s_code_end":
            break
        insts.append(inst)
        pos += inst.size
    return Program(base, bytes(code[:pos]), insts, [None] * len(insts),
                   {inst.addr: i for i, inst in enumerate(insts)}, dead_mask_writes(insts),
                   ends_at_entry=bool(insts) and insts[0].name == "s_endpgm")


class ProgramCache:
    """Decoded programs by entry address, revalidated against the bytes in memory each time."""

    def __init__(self, capacity: int = 64) -> None:
        self._progs: OrderedDict[tuple[int, bool], Program] = OrderedDict()
        self.capacity = capacity

    def get(self, mem: MockMemory, pgm_addr: int, wave64: bool = False) -> Program:
        key = (pgm_addr, wave64)
        prog = self._progs.get(key)
        if prog is not None:
            try:
                if _same_code(mem, pgm_addr, prog.raw) and \
                        (not prog.more or all(_same_code(mem, a, r) for a, r in prog.more)):
                    self._progs.move_to_end(key)
                    return prog
            except PageFault:
                pass
        try:
            data, off = mem.find(pgm_addr, 4, "instruction fetch")
        except PageFault as e:
            raise PageFaultError(f"instruction fetch faulted: {e}", address=pgm_addr,
                                 cause=e) from None
        window = data[off:off + MAX_CODE_BYTES].tobytes()
        prog = decode_program(window, pgm_addr)
        if not prog.insts:
            raise KernelFault("no instructions at the program address", address=pgm_addr)
        prog.wave64 = wave64
        self._progs[key] = prog
        while len(self._progs) > self.capacity:
            self._progs.popitem(last=False)
        return prog


def _same_code(mem: MockMemory, va: int, code: bytes) -> bool:
    """Whether memory at `va` holds `code` (looked at as an instruction fetch: a memory that
    records a dispatch's reads does not count it as one)."""
    data, off = mem.find(va, len(code), "instruction fetch")
    return data[off:off + len(code)].tobytes() == code


# A bounded memo of decoded programs, keyed by address and revalidated against the code bytes on
# every use, so it never changes what a dispatch computes; pass `cache=` to use your own.
_DEFAULT_CACHE = ProgramCache()


# -- dispatch setup ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Dispatch geometry and the register state RSRC1/RSRC2 ask for."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    waves_per_wg: int
    n_vgprs: int
    user_sgprs: int
    tgid: tuple[bool, bool, bool]
    tg_size: bool
    scratch: bool
    tidig: int

    @classmethod
    def of(cls, d: DispatchRecord) -> "Layout":
        return _layout(d.grid, d.block, d.rsrc1, d.rsrc2, d.wave64)

    @classmethod
    def _compute(cls, d: "_Shape") -> "Layout":
        threads = d.block[0] * d.block[1] * d.block[2]
        if threads <= 0 or min(d.grid) < 0:
            raise KernelFault(f"bad dispatch size: grid {d.grid} block {d.block}")
        if max(d.block) > 1024 or threads > 1024:
            raise KernelFault(f"workgroup of {d.block} exceeds 1024 threads")
        gx, gy, gz = d.grid
        bx, by, bz = d.block
        # waves_per_wg counts 32-lane rows: a wave64 is two (see machine.Machine)
        rows = 2 * math.ceil(threads / 64) if d.wave64 else math.ceil(threads / 32)
        return cls(grid=(gx, gy, gz), block=(bx, by, bz),
                   waves_per_wg=rows,
                   n_vgprs=((d.rsrc1 & 0x3F) + 1) * 8,        # RSRC1.VGPRS, granules of 8
                   user_sgprs=d.rsrc2 >> 1 & 0x1F,            # RSRC2.USER_SGPR
                   tgid=(bool(d.rsrc2 >> 7 & 1), bool(d.rsrc2 >> 8 & 1), bool(d.rsrc2 >> 9 & 1)),
                   tg_size=bool(d.rsrc2 >> 10 & 1), scratch=bool(d.rsrc2 & 1),
                   tidig=d.rsrc2 >> 11 & 3)


class _Shape(NamedTuple):
    """What `Layout` is computed from (a launch repeated with one shape reuses it)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    rsrc1: int
    rsrc2: int
    wave64: bool


@lru_cache(maxsize=256)
def _layout(grid: tuple[int, int, int], block: tuple[int, int, int], rsrc1: int, rsrc2: int,
            wave64: bool) -> Layout:
    return Layout._compute(_Shape(grid, block, rsrc1, rsrc2, wave64))


@lru_cache(maxsize=64)
def _wave_pattern(block: tuple[int, int, int], wpg: int, tidig: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """VGPR0 (packed work-item ids, x | y << 10 | z << 20 as far as TIDIG_COMP_CNT enables)
    and the EXEC words of one workgroup's waves: the same for every workgroup."""
    bx, by, bz = block
    t = np.arange(wpg * 32).reshape(wpg, 32)
    x, y, z = t % bx, (t // bx) % by, t // (bx * by)
    v0 = x.copy()
    if tidig >= 1:
        v0 |= y << 10
    if tidig >= 2:
        v0 |= z << 20
    live = t < bx * by * bz
    v0 = np.where(live, v0, 0).astype(np.uint32)
    execs = pack_lanes(live)
    v0.setflags(write=False)
    execs.setflags(write=False)
    return v0, execs


@lru_cache(maxsize=64)
def _user_column(user_sgprs: tuple[int, ...], n_user: int) -> np.ndarray:
    """uint32 [n_user, 1]: the first n_user user SGPRs (missing ones zero, each truncated to 32
    bits), in the shape that fills every wave's column (a relaunch passes the same tuple)."""
    user = list(user_sgprs[:n_user]) + [0] * max(0, n_user - len(user_sgprs))
    col = np.array(user, dtype=np.uint64).astype(np.uint32)[:, None]
    col.setflags(write=False)
    return col


# Batches of up to this many waves (rows) start from a kept copy of their initial state
# (`_batch_start`): all of it but the user SGPRs depends only on the layout and the workgroups.
START_KEPT_MAX_WAVES = 64


def _init_batch(m: Machine, lay: Layout, d: DispatchRecord, wg0: int, n_wg: int) -> None:
    """Initial wave state (RDNA3 ISA section 3.3; AMDGPUUsage "Initial Kernel Execution State")
    of a new (zeroed) machine."""
    n_user = lay.user_sgprs
    if m.n_waves > START_KEPT_MAX_WAVES:
        if n_user:
            m.S[:n_user] = _user_column(d.user_sgprs, n_user)
        m.dirty_s.update(_init_state(m.S, m.V[0], m.wave_wg, m.wave_lds_base, m.lds_bytes,
                                     m.wave64, lay, wg0, n_wg))
        m.dirty_v.add(0)
        return
    S0, v0, wave_wg, lds_base, written = _batch_start(d.grid, d.block, d.rsrc1, d.rsrc2,
                                                      d.wave64, wg0, n_wg, m.lds_bytes)
    S = m.S
    S[:] = S0
    m.V[0] = v0
    if n_wg > 1:   # (one workgroup's are zero, as a new machine's)
        m.wave_wg[:] = wave_wg
        m.wave_lds_base[:] = lds_base
    # The user SGPRs (missing ones zero, each truncated to 32 bits). RSRC2 often loads more
    # than the runtime sets (the rest read zero): one by one when only a few are not zero.
    user = d.user_sgprs[:n_user]
    if user.count(0) + 4 >= len(user):
        for i, u in enumerate(user):
            if u:
                S[i] = u & 0xFFFFFFFF
    else:
        S[:len(user)] = np.array(user, dtype=np.uint64).astype(np.uint32)[:, None]
    m.dirty_s.update(written)
    m.dirty_v.add(0)


@lru_cache(maxsize=64)
def _batch_start(grid: tuple[int, int, int], block: tuple[int, int, int], rsrc1: int,
                 rsrc2: int, wave64: bool, wg0: int, n_wg: int, lds_bytes: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, frozenset[int]]:
    """(SGPRs [128, waves] with the user SGPRs zero, VGPR0 [waves, 32], each wave's workgroup
    in the batch and LDS base, the SGPRs written, user SGPRs included) of a batch's waves at
    their start, read-only. (Keyed by what the layout is computed from: a dataclass's hash
    costs more than the look-up.)"""
    lay = _layout(grid, block, rsrc1, rsrc2, wave64)
    n_waves = n_wg * lay.waves_per_wg
    S = np.zeros((128, n_waves), dtype=np.uint32)
    v0 = np.zeros((n_waves, 32), dtype=np.uint32)
    wave_wg = np.zeros(n_waves, dtype=np.int64)
    lds_base = np.zeros(n_waves, dtype=np.uint32)
    written = frozenset(_init_state(S, v0, wave_wg, lds_base, lds_bytes, wave64, lay, wg0, n_wg))
    for a in (S, v0, wave_wg, lds_base):
        a.setflags(write=False)
    return S, v0, wave_wg, lds_base, written


def _init_state(S: np.ndarray, v0: np.ndarray, wave_wg: np.ndarray, lds_base: np.ndarray,
                lds_bytes: int, wave64: bool, lay: Layout, wg0: int, n_wg: int) -> set[int]:
    """Writes the initial state of a batch but its user SGPRs into zeroed arrays (SGPRs
    [128, waves], VGPR0 [waves, 32], each wave's workgroup in the batch and LDS base); returns
    the SGPRs written (the user SGPRs included)."""
    gx, gy, _ = lay.grid
    wpg = lay.waves_per_wg
    wg_ids: tuple[int | np.ndarray, ...]
    if n_wg == 1:   # (the arrays start zeroed)
        wg_ids = (wg0 % gx, (wg0 // gx) % gy, wg0 // (gx * gy))
    else:
        wg_local = np.repeat(np.arange(n_wg), wpg)
        wave_wg[:] = wg_local
        lds_base[:] = wg_local * lds_bytes
        wg = wg0 + wg_local
        wg_ids = (wg % gx, (wg // gx) % gy, wg // (gx * gy))
    # SGPRs: the user SGPRs, then the enabled workgroup ids, then TG_SIZE, then scratch offset.
    nxt = lay.user_sgprs
    for dim in range(3):
        if lay.tgid[dim]:
            S[nxt][:] = wg_ids[dim]
            nxt += 1
    if lay.tg_size:
        S[nxt][:] = wpg  # TG_SIZE: waves in the workgroup (bits 5:0)
        nxt += 1
    if lay.scratch:
        S[nxt][:] = 0    # private segment wave byte offset
    pattern, execs = _wave_pattern(lay.block, wpg, lay.tidig)
    v0.reshape(n_wg, wpg, 32)[:] = pattern
    written = set(range(nxt + 1))
    written.add(EXEC_LO)
    if wave64:
        # EXEC_LO holds lanes 0-31 (the even row), EXEC_HI lanes 32-63, in both rows
        pairs = execs.reshape(-1, 2)
        S[EXEC_LO].reshape(n_wg, wpg)[:] = np.repeat(pairs[:, 0], 2)
        S[EXEC_LO + 1].reshape(n_wg, wpg)[:] = np.repeat(pairs[:, 1], 2)
        written.add(EXEC_LO + 1)
    else:
        S[EXEC_LO].reshape(n_wg, wpg)[:] = execs
    return written


def _batches(lay: Layout, d: DispatchRecord) -> int:
    """Workgroups per batch: as many as fit the memory budget and the wave cap, and, for a
    kernel with scratch, the scratch slots (each running wave holds one, as on the hardware)."""
    per_wave = lay.n_vgprs * 32 * 4 + 128 * 4 + 32
    per_wg = lay.waves_per_wg * per_wave + d.lds_bytes
    by_mem = max(1, BATCH_MEMORY_B // per_wg)
    by_waves = max(1, BATCH_MAX_WAVES // lay.waves_per_wg)
    n = min(by_mem, by_waves)
    if lay.scratch and d.scratch_wave_B:
        if d.scratch_slots < lay.waves_per_wg:
            raise KernelFault(f"COMPUTE_TMPRING_SIZE.WAVES = {d.scratch_slots} scratch slots "
                              f"cannot hold one workgroup of {lay.waves_per_wg} waves")
        n = min(n, d.scratch_slots // lay.waves_per_wg)
    return n


# -- the scheduler -----------------------------------------------------------------------------
DESCRIBE_MAX_PLACES = 8   # program counters (and states) a report lists
CHECK_EVERY = 256   # instructions (of any wave set size) between looks at the clock


class Dispatch:
    """One dispatch in execution, resumable: `advance(seconds)` runs it for about that long and
    says whether it finished, so the mock GPU can keep a kernel that never ends from hanging
    the host and report where its waves are (`describe`)."""

    def __init__(self, dispatch: DispatchRecord, mem: MockMemory, *,
                 cache: ProgramCache | None = None,
                 max_wave_instructions: int = 1 << 40) -> None:
        self.record = dispatch
        self.lay = Layout.of(dispatch)
        self.prog = (cache or _DEFAULT_CACHE).get(mem, dispatch.pgm_addr, dispatch.wave64)
        self.mem = mem
        self.limit = max_wave_instructions
        self.stats = ExecStats()
        self.done = False
        self.wave_sets: list[WaveSet] = []
        self.machine: Machine | None = None
        self._deadline = math.inf
        self._ticks = CHECK_EVERY
        self._gws_queued = False   # a GWS op has queued waves in this dispatch
        if self.prog.ends_at_entry and self._end_at_entry():
            return
        self._gen = self._run()

    def _end_at_entry(self) -> bool:
        """Runs a dispatch whose program is s_endpgm at its entry without building its waves,
        when all its workgroups fit one batch (one wave set, whose single instruction never
        reaches a look at the clock or the instruction limit, as in `_run_wave_set`): every
        wave issues the s_endpgm with its EXEC (the workgroup's live lanes) and ends. Checks
        what `_run` checks before its waves start (`_batches`). False: run it the general
        way."""
        lay, d = self.lay, self.record
        gx, gy, gz = lay.grid
        n_wg = gx * gy * gz
        # (one workgroup always fits a batch; the scratch slots may still refuse it)
        if (n_wg > 1 or lay.scratch and d.scratch_wave_B) and n_wg > _batches(lay, d):
            return False
        bx, by, bz = lay.block
        waves = n_wg * (lay.waves_per_wg // (2 if d.wave64 else 1))
        stats = self.stats
        stats.waves = stats.wave_instructions = waves
        stats.lane_instructions = n_wg * bx * by * bz
        stats.workgroups = n_wg
        self.done = True
        return True

    def advance(self, seconds: float = math.inf) -> bool:
        """Runs for about `seconds` (to the end when infinite); True once the dispatch is done.
        A KernelFault ends it."""
        if self.done:
            return True
        self._deadline = time.perf_counter() + seconds
        try:
            with np.errstate(all="ignore"):
                next(self._gen)
        except StopIteration:
            self.done = True
        except BaseException:
            self.done = True
            if self.record.gws is not None:
                self.record.gws.drop_waiters()
            raise
        return self.done

    def describe(self) -> str:
        """Where the waves of the running batch are: per program counter and state (running,
        at a barrier, waiting, queued), the waves there (and their workgroups), the address and
        the instruction. Bounded: wave sets at one place are reported together, and past
        DESCRIBE_MAX_PLACES places the rest are counted, not listed."""
        m = self.machine
        if self.done or m is None:
            return "no waves running"
        wg0 = getattr(self, "_wg0", 0)
        # (each wave set's selection, turned into wave ids only for the places listed: the
        # queue asks after every time slice, and a contended atomic leaves a wave set per wave)
        places: dict[tuple[int, str], list[slice | np.ndarray]] = {}
        for g in self.wave_sets:
            if not g.n:
                continue
            state = " (at a barrier)" if g.at_barrier else " (waiting)" if g.parked else \
                f" (queued at GWS resource {g.waiting.rid})" if g.waiting else ""
            places.setdefault((g.pc, state), []).append(g.idx)
        if not places:
            return "no waves running"
        lines = []
        every = np.arange(m.n_waves)
        for (pc, state), sels in sorted(places.items())[:DESCRIBE_MAX_PLACES]:
            ids = np.unique(np.concatenate([every[sel] for sel in sels]))
            inst = self.prog.insts[pc] if pc < len(self.prog.insts) else None
            where = f"{inst.addr:#x} {inst}" if inst is not None else "past the end"
            wgs = np.unique(m.wave_wg[ids]) + wg0
            lines.append(f"waves {_ranges(ids)} of workgroups {_ranges(wgs)}: "
                         f"pc {where}{state}")
        more = len(places) - DESCRIBE_MAX_PLACES
        if more > 0:
            lines.append(f"and waves at {more} other place(s)")
        return "; ".join(lines)

    def _gws_stuck(self, wave_sets: list[WaveSet]) -> KernelFault:
        """The fault for waves queued at GWS resources that no running wave can release."""
        lay = self.lay
        total = lay.grid[0] * lay.grid[1] * lay.grid[2]
        m = self.machine
        assert m is not None
        n_wg = m.n_waves // lay.waves_per_wg
        later = total - (self._wg0 + n_wg)
        q = next(g for g in wave_sets if g.waiting is not None)
        inst = self.prog.insts[q.pc - 1]
        why = ("every other wave of the dispatch is queued too, at a barrier or ended"
               if not later else
               f"the running waves are all queued, at a barrier or ended, and the {later} "
               f"workgroups not started yet cannot run before them (the mock runs "
               f"{n_wg} workgroups at a time; the hardware would need every workgroup "
               "resident)")
        return KernelFault(f"waves queued at GWS resources wait forever: {why}; the hardware "
                           f"would hang. Waves: {self.describe()}", address=inst.addr,
                           instruction=str(inst))

    # -- the generator that does the work
    def _run(self):  # type: ignore[no-untyped-def]
        lay, d = self.lay, self.record
        n_wg_total = lay.grid[0] * lay.grid[1] * lay.grid[2]
        per_batch = _batches(lay, d)
        scratch = ScratchSetup(d.scratch_va, d.scratch_wave_B, d.scratch_slots) \
            if d.scratch_va and d.scratch_wave_B else None
        m = None
        for wg0 in range(0, n_wg_total, per_batch):
            n_wg = min(per_batch, n_wg_total - wg0)
            m = Machine.take(self.mem, n_wg * lay.waves_per_wg, lay.n_vgprs, n_wg,
                             d.lds_bytes, d.wave64) if m is None else \
                Machine(self.mem, n_wg * lay.waves_per_wg, lay.n_vgprs, n_wg, d.lds_bytes,
                        reuse=m, wave64=d.wave64)
            m.scratch = scratch
            m.gws = d.gws
            _init_batch(m, lay, d, wg0, n_wg)
            self.machine, self._wg0 = m, wg0
            yield from self._run_batch(m)
            self.stats.waves += m.n_waves // (2 if d.wave64 else 1)
            self.stats.workgroups += n_wg
        self.wave_sets = []
        if m is not None:
            # (a dispatch that faulted or was abandoned keeps its machine: it is not given back)
            self.machine = None
            m.give_back()

    def _run_batch(self, m: Machine):  # type: ignore[no-untyped-def]
        prog = self.prog
        wave_sets = self.wave_sets = [WaveSet(m, ALL, 0)]
        while wave_sets:
            if self._gws_queued:
                gws_unit.release_waiting(wave_sets)
            runnable = [g for g in wave_sets
                        if not g.at_barrier and not g.parked and g.waiting is None]
            if not runnable:
                parked = [g for g in wave_sets if g.parked]
                if parked:
                    # Waves set aside at a contended atomic go on, one at a time in the order
                    # they were set aside, once nothing else can.
                    parked[0].parked = False
                    continue
                if self._gws_queued and any(g.waiting for g in wave_sets):
                    if gws_unit.pass_free_barriers(wave_sets):
                        continue
                    raise self._gws_stuck(wave_sets)
                # Every live wave waits at a barrier: all of them pass it.
                for g in wave_sets:
                    g.at_barrier = False
                    g.pc += 1
                wave_sets[:] = _merge_same_pc(wave_sets)
                continue
            g = min(runnable, key=lambda h: h.pc)
            same = [h for h in runnable if h.pc == g.pc]
            if len(same) > 1:
                merged = merge(same)
                wave_sets[:] = [h for h in wave_sets if all(h is not s for s in same)] + [merged]
                g = merged
            others = [h.pc for h in wave_sets if h is not g and not h.at_barrier
                      and not h.parked and h.waiting is None]
            horizon = min(others) if others else len(prog.insts) + 1
            wave_sets.remove(g)
            rest = yield from self._run_wave_set(g, horizon)
            wave_sets.extend(rest)

    def _tally(self, wave_instructions: int, lanes: int, inst: Any) -> bool:
        """Adds what a wave set ran since the last look at the clock to the stats; raises
        KernelFault naming `inst` (the instruction about to run) past the instruction limit.
        Returns whether the time slice is over."""
        stats = self.stats
        stats.wave_instructions += wave_instructions
        stats.lane_instructions += lanes
        if stats.wave_instructions > self.limit:
            raise KernelFault(f"instruction limit of {self.limit} wave-instructions exceeded (a "
                              "kernel that never ends?)", address=inst.addr, instruction=str(inst))
        return time.perf_counter() > self._deadline

    def _run_wave_set(self, g: WaveSet, horizon: int):  # type: ignore[no-untyped-def]
        """Runs g until it reaches another wave set's pc, splits, waits, or ends; returns what is
        left (a generator: it pauses when the time slice is over)."""
        prog, stats = self.prog, self.stats
        n_insts = len(prog.insts)
        steps = prog.steps
        n = g.n
        rows = 2 if g.m.wave64 else 1   # rows of one wave: a wave64 is two
        waves = n // rows   # wave-instructions count waves, not rows
        stop = min(horizon, n_insts)
        # Counted locally and added to stats at each look at the clock and on the way out
        # (attribute updates per instruction are a good part of a one-wave step's cost);
        # `budget`: instructions until the next look, carried across wave sets in self._ticks.
        count = lanes = 0
        budget = self._ticks
        # The pc is kept in a local and stored into g where others look: at a pause, on the
        # way out, before a jump (step functions do not read it).
        pc = g.pc
        blocks = prog.blocks
        n_blocks = len(blocks)
        self.wave_sets.append(g)   # visible to describe() while it runs
        try:
            while True:
                if pc >= stop:
                    if pc < horizon:
                        raise KernelFault("execution ran past the end of the program (no "
                                          "s_endpgm)", address=prog.base + len(prog.raw))
                    g.pc = pc
                    return [g]
                blk = blocks[pc] if pc < n_blocks else None
                if blk is None:
                    blk = prog.block(pc)
                    blocks, n_blocks = prog.blocks, len(prog.blocks)
                if blk.end <= stop:
                    # A straight run of NEXT steps in one go (the per-step bookkeeping below
                    # is a good part of a one-wave instruction's cost); the clock is looked at
                    # before it, so a run overshoots the budget by at most one block.
                    if count >= budget:
                        over = self._tally(count * waves, lanes, blk.body[0][2].inst)
                        count = lanes = 0
                        budget = CHECK_EVERY
                        if over:
                            g.pc = pc
                            yield
                    P = g.fast
                    if blk.binders is not None and P is not None and not g.dirty:
                        # EXEC full and no unpacked lane masks: the bindable steps run as one
                        # numpy call each on views bound once per wave set (on the block's
                        # second run for it); after any other step, the same must still hold,
                        # else the rest of the block runs step by step.
                        bound = P.bound.get(pc)
                        if bound is None:
                            P.bound[pc] = ()
                        else:
                            if not bound:
                                bound = P.bound[pc] = _bind(blk, pc, g, P)
                            active = g.active
                            try:
                                for fn, args, st, is_bound, after, through in bound:
                                    if is_bound:
                                        fn(*args)
                                    else:
                                        fn(g)
                                        if g.fast is not P or g.dirty:
                                            break
                                else:
                                    lanes += active * blk.n_slots
                                    count += blk.n_slots
                                    pc = blk.end
                                    continue
                            except Exception as e:
                                raise _fault(st, e) from None
                            # EXEC or a lane mask changed at step st: its NOPs count the new
                            # EXEC, and the rest of the block runs from the slot after it
                            lanes += active * (through - st.skip) + st.skip * g.active
                            count += through
                            pc = after
                            continue
                    try:
                        for fn, skip, st in blk.body:
                            lanes += g.active
                            fn(g)
                            if skip:
                                lanes += skip * g.active
                    except Exception as e:
                        raise _fault(st, e) from None
                    count += blk.n_slots
                    pc = blk.end
                    continue
                step = steps[pc] or prog.step(pc)
                lanes += g.active
                count += 1
                if count >= budget:
                    over = self._tally(count * waves, lanes, step.inst)
                    count = lanes = 0
                    budget = CHECK_EVERY
                    if over:
                        g.pc = pc
                        yield
                kind = step.kind
                if kind == NEXT:
                    try:
                        step.fn(g)  # type: ignore[misc]  # NEXT steps always carry one
                    except Exception as e:
                        raise _fault(step, e) from None
                    skip = step.skip
                    if skip:   # the NOPs after it: executed, as far as anyone can tell
                        pc += 1 + skip
                        count += skip
                        lanes += skip * g.active
                    else:
                        pc += 1
                elif kind == NOP:
                    pc += 1
                elif kind == ATOMIC:
                    if n > rows and step.contended(g):  # type: ignore[misc]  # ATOMIC has one
                        # Lanes of several waves race on one address: the waves go on one after
                        # another (one of the orders the hardware may pick), the first now and
                        # each of the others once nothing else can run. Split into single waves
                        # once, so the whole race costs time linear in its waves.
                        g.pc = pc
                        waves_here = g.singles()
                        for w in waves_here[1:]:
                            w.parked = True
                        return waves_here
                    before = g.active
                    try:
                        ran = step.fn(g)  # type: ignore[misc]
                    except Exception as e:
                        raise _fault(step, e) from None
                    pc += 1
                    if ran:
                        # it ran its retry loop's tail too (ops_mem.RetryTail): those slots
                        # count with the EXEC they ran under, the one before the tail's last
                        # step updated it
                        pc += ran
                        count += ran
                        lanes += ran * before
                        if g.w1 >= 0 and pc < stop:
                            # one wave: the loop's further iterations without the look-ups
                            # above for each of their slots
                            loop = step.loop
                            if loop is None:
                                loop = step.loop = retry_loop(prog, pc - 1 - ran, pc) or False
                            if loop:
                                pc, count, lanes = _run_retry_loop(loop, step, g, count, lanes,
                                                                   budget)
                elif kind == BRANCH:
                    if step.fn is None:
                        pc = step.target
                        continue
                    taken = step.fn(g)
                    if taken is True or taken is False:   # every wave agrees
                        if taken and step.target < pc and g.w1 >= 0 and g.planes is not None:
                            # one wave going round a loop: its further time rounds without
                            # the look-ups above for each of their slots
                            loop = step.loop
                            if loop is None:
                                loop = step.loop = one_wave_loop(prog, pc) or False
                            if loop:
                                pc, count, lanes = _run_loop(loop, prog, g, count, lanes,
                                                               budget)
                                continue
                        pc = step.target if taken else pc + 1
                        continue
                    k = np.count_nonzero(taken)
                    if k == n:
                        pc = step.target
                    elif not k:
                        pc += 1
                    elif step.masked_skip and k * 4 <= 3 * n:
                        # The skipped block only does EXEC-masked work, so the waves whose EXEC
                        # is empty can come along and do nothing; keeping the wave set whole is
                        # cheaper than a split and a merge unless most waves would skip.
                        pc += 1
                    else:
                        return list(g.split(np.asarray(taken), step.target, pc + 1))
                elif kind == END:
                    return []
                elif kind == BARRIER:
                    g.pc = pc
                    g.at_barrier = True
                    return [g]
                elif kind == WAIT:
                    blocked = _call(step, g)
                    pc += 1
                    if blocked is not None:   # queued waves wait after the op
                        self._gws_queued = True
                        g.pc = pc
                        if blocked.rows.all():
                            g.waiting = blocked
                            return [g]
                        a, rest = g.split(~blocked.rows, pc, pc)
                        rest.waiting = blocked
                        return [a, rest]
                else:  # JUMP
                    g.pc = pc
                    return _jump(prog, g, step, _call(step, g), self.mem)
        finally:
            stats.wave_instructions += count * waves
            stats.lane_instructions += lanes
            self._ticks = budget - count
            self.wave_sets.remove(g)


# Branches whose condition is a Python bool for one wave with planes (ops_salu._scc_cond,
# _exec_cond)
_BOOL_BRANCHES = frozenset({"s_cbranch_scc0", "s_cbranch_scc1", "s_cbranch_execz",
                            "s_cbranch_execnz"})


class Loop(NamedTuple):
    """A loop of straight-line code: the slots from `head` up to the conditional branch back
    to it at `branch`."""

    head: int
    branch: int
    cond: Callable[[WaveSet], Any]   # the branch's condition
    # (fn, NOP slots after it, step) of each slot from head to the branch; fn None: a NOP slot
    body: tuple[tuple[Callable[[WaveSet], Any] | None, int, Step], ...]


def one_wave_loop(prog: Program, branch: int) -> Loop | None:
    """The loop the branch at slot `branch` closes, or None where it is not a conditional
    branch of SCC or EXEC back to straight-line code (NOP and NEXT steps only)."""
    br = prog.steps[branch]
    if br is None or br.kind != BRANCH or br.fn is None or \
            br.inst.name not in _BOOL_BRANCHES or not 0 <= br.target < branch:
        return None
    body = _straight_run(prog, br.target, branch)
    return None if body is None else Loop(br.target, branch, br.fn, body)


def _straight_run(prog: Program, start: int, end: int) \
        -> tuple[tuple[Callable[[WaveSet], Any] | None, int, Step], ...] | None:
    """(fn, NOP slots after it, step) of each slot from `start` to `end` (fn None: a NOP slot),
    or None where a slot between is not a NOP or a NEXT step or the last one runs past `end`."""
    body: list[tuple[Callable[[WaveSet], Any] | None, int, Step]] = []
    j = start
    while j < end:
        try:
            s = prog.step(j)
        except KernelFault:
            return None
        if s.kind == NOP:
            body.append((None, 0, s))
            j += 1
        elif s.kind == NEXT:
            body.append((s.fn, s.skip, s))
            j += 1 + s.skip
        else:
            return None
    return tuple(body) if j == end else None


class BoundLoop(NamedTuple):
    """A loop's steps bound to one wave set's planes (_bind_loop). Where every step is bound
    and the branch tests the SCC of one wave, `calls` holds each step's (fn, args) and the
    rounds run without looking at each step (`_run_bound_rounds`); else `calls` is None."""

    steps: tuple[BoundStep, ...]
    # the bound calls (a step's `parts` where it lists them) and the step of each
    calls: tuple[tuple[Callable[..., Any], tuple[Any, ...]], ...] | None
    owners: tuple[Step, ...] = ()
    scc: memoryview | None = None   # the machine's SCC, one bool per wave
    taken_if: bool = True           # the SCC value that takes the branch


def _bind_loop(loop: Loop, prog: Program, g: WaveSet, P: Planes) -> BoundLoop:
    """The loop's steps bound to P where they can be (as _bind does for a block); NOP slots
    are left out (they are only counted)."""
    out: list[BoundStep] = []
    pc, slots = loop.head, 0
    for fn, skip, st in loop.body:
        pc += 1 + skip
        slots += 1 + skip
        if fn is None:
            continue
        out.append(_bound_step(fn, fast_valu.binder(fn), st, pc, slots, g, P))
    steps = tuple(out)
    name = prog.insts[loop.branch].name
    if all(b[3] for b in steps) and P.s1 is not None and P.scc.ndim == 1 and \
            P.scc.dtype == np.bool_ and name in ("s_cbranch_scc0", "s_cbranch_scc1"):
        calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        owners: list[Step] = []
        for fn, args, st, _, _, _ in steps:
            parts = getattr(fn, "parts", None) or ((fn, args),)
            calls += parts
            owners += [st] * len(parts)
        # (_run_bound_rounds tells which call raised by its function and arguments tuple)
        if len({(id(f), id(a)) for f, a in calls}) == len(calls):
            return BoundLoop(steps, tuple(calls), tuple(owners), P.scc.data,
                             name == "s_cbranch_scc1")
    return BoundLoop(steps, None)


def _run_loop(loop: Loop, prog: Program, g: WaveSet, count: int, lanes: int, budget: int
              ) -> tuple[int, int, int]:
    """Runs a loop of one wave (with planes) from its head, after its branch was taken: time
    round after time round as the scheduler would run them (the same steps, the same counts;
    while EXEC is full and no lane mask is unpacked, the steps bound to the wave set's planes
    as a block's are), while the instructions' count stays short of `budget` through a whole
    time round: the scheduler looks at the clock before the round that would reach it, never
    past it. Returns (the slot to go on at, count, lanes): after the branch once it is not
    taken, the head, or the slot after a step that changed EXEC or unpacked a lane mask in a
    bound time round."""
    head, branch, cond, body = loop
    n_body = branch - head
    key = -1 - branch   # (P.bound's key for the loop: blocks use their first slot)
    while count + n_body + 1 < budget:
        P = g.fast
        if P is not None and not g.dirty:
            bl = P.bound.get(key)
            if bl is None:
                bl = P.bound[key] = _bind_loop(loop, prog, g, P)
            if bl.calls is not None:
                return _run_bound_rounds(loop, bl, P.w, g.active, count, lanes, budget)
            active = g.active
            for fn, args, st, is_bound, after, through in bl.steps:
                try:
                    if is_bound:
                        fn(*args)
                    else:
                        fn(g)
                        if g.fast is not P or g.dirty:
                            # EXEC or a lane mask changed at step st: its NOPs count the new
                            # EXEC, and the rest of the time round runs slot by slot
                            lanes += active * (through - st.skip) + st.skip * g.active
                            return after, count + through, lanes
                except Exception as e:
                    raise _fault(st, e) from None
            lanes += active * n_body
        else:
            for fn, skip, st in body:
                lanes += g.active
                if fn is not None:
                    try:
                        fn(g)
                    except Exception as e:
                        raise _fault(st, e) from None
                    if skip:
                        lanes += skip * g.active
        count += n_body + 1
        lanes += g.active
        if not cond(g):   # (one wave with planes: a bool)
            return branch + 1, count, lanes
    return head, count, lanes


def _run_bound_rounds(loop: Loop, bl: BoundLoop, w: int, active: int, count: int, lanes: int,
                      budget: int) -> tuple[int, int, int]:
    """_run_loop's time rounds where every step of the loop is bound and its branch tests the
    SCC of wave w (BoundLoop.calls): no bound step changes EXEC or unpacks a lane mask, so
    every round counts the same, and the rounds run as calls of the bound steps and a look at
    SCC, until the branch is not taken or the next round would reach `budget`."""
    per = loop.branch - loop.head + 1
    add = active * per
    calls, scc, taken_if = bl.calls, bl.scc, bl.taken_if
    assert calls is not None and scc is not None
    fn: Any = None
    args: Any = None
    try:
        while count + per < budget:
            for fn, args in calls:
                fn(*args)
            count += per
            lanes += add
            if scc[w] is not taken_if:
                return loop.branch + 1, count, lanes
    except Exception as e:
        # (the call that raised is the one the loop variables hold: each bound call has its
        # own function or its own arguments tuple)
        i = next((j for j, c in enumerate(calls) if c[0] is fn and c[1] is args), 0)
        raise _fault(bl.owners[i], e) from None
    return loop.head, count, lanes


class RetryLoop(NamedTuple):
    """A compare-and-swap retry loop (what clang emits for a float atomic add, min or max):
    the slots from `head` up to the compare-and-swap, the swap at `cas` with its tail
    (ops_mem.RetryTail, `tail` slots), and at `branch` the s_cbranch_execnz back to `head`."""

    head: int
    cas: int
    tail: int
    branch: int
    cond: Callable[[WaveSet], Any]   # the branch's condition
    # (fn, NOP slots after it, step) of each slot from head to the swap; fn None: a NOP slot
    body: tuple[tuple[Callable[[WaveSet], Any] | None, int, Step], ...]
    slots: int   # the slots of one time round: branch, body, swap and tail
    # ops_mem.fadd_retry_rounds of a float atomic add's loop, or None
    fadd: Callable[[WaveSet, int, int], tuple[int, int, bool] | None] | None = None


def _fadd_rounds(prog: Program, cas: int, body: tuple[tuple[Any, int, Step], ...]
                 ) -> Callable[[WaveSet, int, int], tuple[int, int, bool] | None] | None:
    """ops_mem.fadd_retry_rounds for a retry loop whose only instruction before the swap is
    `v_add_f32 vNEW, vCMP, vX` (either order, no modifiers) adding into the swap's data from
    its compare value, with vX and the address VGPR not written in the loop; else None."""
    steps = [st for fn, _, st in body if fn is not None]
    if len(steps) != 1:
        return None
    add, sw = steps[0].inst, prog.insts[cas]
    tail = retry_tail(sw, _slots_after(prog, cas))
    if tail is None or add.name != "v_add_f32" or add.enc != "VOP2" or \
            not fast_valu.is_plain(add):
        return None
    f = sw.f
    vnew, vcmp, vaddr, ret = f["data"], tail.cmp, f["addr"], f["vdst"]
    srcs = {add.f["src0"] - VGPR0, add.f["src1"] - VGPR0}
    if add.f["vdst"] != vnew or vcmp not in srcs or len(srcs) != 2 or \
            f["saddr"] in (NULL, 0x7F) or {tail.mask, tail.done} & {f["saddr"], f["saddr"] + 1}:
        return None
    (x,) = srcs - {vcmp}
    if not 0 <= x < 256 or x in (vnew, vcmp, ret) or vaddr in (vnew, vcmp, ret):
        return None
    return fadd_retry_rounds(sw, tail, x)


def retry_loop(prog: Program, cas: int, branch: int) -> RetryLoop | None:
    """The retry loop whose compare-and-swap (with its tail) is at slot `cas` and whose tail
    ends before slot `branch`, or None where the slots are anything else: the branch must be an
    s_cbranch_execnz back to at or before the swap, and every slot from its target to the swap
    a NOP or a NEXT step (straight-line code)."""
    try:
        br = prog.step(branch)
    except KernelFault:
        return None
    if br.kind != BRANCH or br.inst.name != "s_cbranch_execnz" or br.fn is None or \
            not 0 <= br.target <= cas:
        return None
    body = _straight_run(prog, br.target, cas)
    if body is None:
        return None
    return RetryLoop(br.target, cas, branch - cas - 1, branch, br.fn, body,
                     1 + (cas - br.target) + 1 + (branch - cas - 1),
                     _fadd_rounds(prog, cas, body))


def _run_retry_loop(loop: RetryLoop, cas: Step, g: WaveSet, count: int, lanes: int,
                    budget: int) -> tuple[int, int, int]:
    """Runs a retry loop of one wave from its branch, after the swap ran its tail: time round
    after time round as the scheduler would run them slot by slot (the same steps, the same
    counts), while the instructions' count stays short of `budget` through a whole time round:
    the scheduler looks at the clock before the round that would reach it, never past it.
    Returns (the slot to go on at, count, lanes): after the branch once EXEC is empty, the
    slot after the swap where it did not run the tail, or the branch."""
    branch, body, cond, swap, need = loop.branch, loop.body, loop.cond, cas.fn, loop.slots
    fadd = loop.fadd
    assert swap is not None   # (ATOMIC steps carry one)
    while count + need < budget:
        if fadd is not None:
            # whole rounds of a float atomic add's loop at once, as many as fit in the budget
            # the way the loop below would run them
            got = fadd(g, (budget - count - 1) // need, need)
            if got is not None:
                count += got[0] * need
                lanes += got[1]
                continue
        lanes += g.active
        count += 1
        if not cond(g):   # (one wave: a bool)
            return branch + 1, count, lanes
        for fn, skip, st in body:
            lanes += g.active
            count += 1 + skip
            if fn is not None:
                try:
                    fn(g)
                except Exception as e:
                    raise _fault(st, e) from None
                if skip:
                    lanes += skip * g.active
        before = g.active
        lanes += before
        count += 1
        try:
            ran = swap(g)
        except Exception as e:
            raise _fault(cas, e) from None
        if not ran:
            return loop.cas + 1, count, lanes
        count += ran
        lanes += ran * before
    return branch, count, lanes


def _ranges(ids: np.ndarray, most: int = 8) -> str:
    """'0-3,7' for [0 1 2 3 7]; past `most` runs, '0-3,7,... (N in all)'."""
    out: list[str] = []
    vals = [int(v) for v in np.asarray(ids).reshape(-1)]
    i = 0
    while i < len(vals):
        if len(out) == most:
            out.append(f"... ({len(vals)} in all)")
            break
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(f"{vals[i]}" if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(out)


def _merge_same_pc(wave_sets: list[WaveSet]) -> list[WaveSet]:
    by_pc: dict[int, list[WaveSet]] = {}
    for g in wave_sets:
        by_pc.setdefault(g.pc, []).append(g)
    return [merge(gs) if len(gs) > 1 else gs[0] for gs in by_pc.values()]


def _call(step: Step, g: WaveSet) -> Any:
    assert step.fn is not None  # NEXT steps always carry their function
    try:
        return step.fn(g)
    except Exception as e:
        raise _fault(step, e) from None


def _fault(step: Step, e: Exception) -> Exception:
    """What an instruction's exception becomes: its own KernelFault, a PageFaultError for a
    memory fault, a KernelFault for bad state (anything else is a bug: re-raised as it is)."""
    if isinstance(e, KernelFault):
        return e
    if isinstance(e, PageFault):
        return PageFaultError(str(e), address=step.inst.addr, instruction=str(step.inst),
                              cause=e)
    if isinstance(e, (IndexError, ValueError, TypeError, MemoryError)):
        return KernelFault(f"bad state executing the instruction: {e}", address=step.inst.addr,
                           instruction=str(step.inst), cause=e)
    return e


def _jump(prog: Program, g: WaveSet, step: Step, targets: np.ndarray,
          mem: MockMemory) -> list[WaveSet]:
    out = []
    for t in np.unique(targets):
        idx = prog.locate(int(t), mem)
        if idx is None:
            raise KernelFault(f"jump to {int(t):#x}, which is not an instruction of the program",
                              address=step.inst.addr, instruction=str(step.inst))
        sel = targets == t
        if sel.all():
            g.pc = idx
            return [g]
        a, rest = g.split(sel, idx, g.pc)
        out.append(a)
        g = rest
    return out


def execute(dispatch: DispatchRecord, mem: MockMemory, *, cache: ProgramCache | None = None,
            max_wave_instructions: int = 1 << 40) -> ExecStats:
    """Runs one dispatch to completion on `mem`; raises KernelFault if the kernel faults."""
    run = Dispatch(dispatch, mem, cache=cache, max_wave_instructions=max_wave_instructions)
    run.advance()
    return run.stats
