"""Executes a PTX kernel over a grid, vectorized with numpy over every thread of a batch of CTAs.

Each register is one numpy array with an element per thread (its raw bits: uint8..uint64, bool for
predicates); an instruction reads its operands as its own type (a view), computes for the threads
it runs on and writes back their elements. Control flow keeps one program counter per thread;
each step runs the instruction of the threads with the smallest program counter (all threads
while they agree, the common case). Running the least advanced threads first is correct for any
control flow: threads that branched ahead wait at their target until the others catch up, so
divergent paths reconverge where the code joins again, and no thread is ever skipped.

`bar.sync` parks the threads that reach it until every thread of their CTA has reached a barrier
or exited. Warp-level instructions (`shfl.sync`, `vote.sync`, `redux.sync`, `activemask`) see
32 consecutive threads of a CTA as a warp. Atomics are applied in thread order, so results under
contention are those of one valid serialization.

Faults (`PtxFault`) name the PTX line, the thread (CTA and thread index) and the address; a grid
that is not finished within its time slice returns, and `describe()` gives the warps' positions.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from runtime.drivers.mock.memory import MockMemory
from runtime.drivers.mock.ptx import ops
from runtime.drivers.mock.ptx.parse import Body, Instr
from runtime.drivers.nv.ptx import PtxModule

ALL = slice(None)
WARP = 32
MAX_BATCH_THREADS = 1 << 15
# Far above any real program counter: masks out threads that are not runnable.
_BIG_PC = np.int32(1 << 30)

# control kinds
K_NORMAL, K_BRA, K_EXIT, K_BAR, K_TRAP = range(5)


class PtxFault(Exception):
    """A kernel did something the hardware faults on: names the PTX line, thread and address."""

    def __init__(self, msg: str, va: int | None = None) -> None:
        super().__init__(msg)
        self.va = va


@dataclass
class LaunchEnv:
    """What a launch gives the kernel: its shape, constant bank 0, shared memory and windows, and
    where its module's image lies."""

    mem: MockMemory
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_B: int
    cb0: bytes
    param_base: int
    shared_window: int
    local_window: int
    image_va: int
    data_va: int
    shared_base: int
    static_end: int
    clock_ns: Callable[[], int] = time.perf_counter_ns


@lru_cache(maxsize=64)
def _thread_layout(block: tuple[int, int, int], nb: int) -> tuple[Any, ...]:
    """Per-thread index arrays of `nb` CTAs of shape `block` (shared, read-only): linear thread
    index in the CTA, CTA index in the batch, %tid, %laneid, index in the batch, warp start."""
    bx, by, _ = block
    bt = block[0] * block[1] * block[2]
    t = np.tile(np.arange(bt, dtype=np.uint32), nb)
    cta_local = np.repeat(np.arange(nb, dtype=np.int64), bt)
    tid = (t % np.uint32(bx), (t // np.uint32(bx)) % np.uint32(by), t // np.uint32(bx * by))
    lane = (t % np.uint32(WARP)).astype(np.uint32)
    gidx = np.arange(nb * bt, dtype=np.int64)
    warp_base = gidx - lane.astype(np.int64)
    out = (t, cta_local, tid, lane, gidx, warp_base)
    for a in (t, cta_local, *tid, lane, gidx, warp_base):
        a.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _cta_layout(grid: tuple[int, int, int], bt: int, start: int,
                stop: int) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per-thread linear CTA index and %ctaid of the CTAs [start, stop) of `grid`, `bt` threads
    each (shared, read-only): a launch repeated with one shape reuses them."""
    cta = np.repeat(np.arange(start, stop, dtype=np.int64), bt)
    gx, gy, _ = grid
    ctaid = (cta % gx, (cta // gx) % gy, cta // (gx * gy))
    for a in (cta, *ctaid):
        a.flags.writeable = False
    return cta, ctaid


class State:
    """The threads of one batch of CTAs."""

    def __init__(self, kern: "Kernel", env: LaunchEnv, ctas: range) -> None:
        self.kern, self.env = kern, env
        bx, by, bz = env.block
        self.bt = bt = bx * by * bz
        self.nb = nb = len(ctas)
        self.n = n = nb * bt
        lay = _thread_layout(env.block, nb)
        self.t, self.cta_local, self.tid, self.lane, self.gidx, self.warp_base = lay
        # linear CTA index in the grid, and %ctaid
        self.cta, self.ctaid = _cta_layout(env.grid, bt, ctas.start, ctas.stop)
        # one block of zeroed rows per register width (a few allocations, not one per register)
        self.R: list[np.ndarray] = [np.empty(0)] * len(kern.reg_dtypes)
        for dt, regs in kern.reg_groups.items():
            rows = np.zeros((len(regs), n), dt)
            for j, r in enumerate(regs):
                self.R[r] = rows[j]
        self.pc = np.zeros(n, np.int32)
        self.done = np.zeros(n, np.bool_)
        self.waiting = np.zeros(n, np.bool_)
        self.local_B = -(-kern.body.local_B // 16) * 16
        self._shared: np.ndarray | None = None
        self._local: np.ndarray | None = None
        self._bar_val: np.ndarray | None = None
        self.started = False    # whether any thread has run (then `done` may have exits)
        self.steps = 0
        self.cb0_array = np.frombuffer(env.cb0, np.uint8)
        self.uniform_pc: int | None = 0
        self.shared_offsets: dict[str, int] = {}

    # Shared memory, local memory and the barrier-reduction values are made on first use: most
    # kernels need only some of them, and a launch of a small grid is mostly this set-up.
    @property
    def shared(self) -> np.ndarray:
        """The batch's shared memory: one launch-sized block per CTA."""
        if self._shared is None:
            self._shared = np.zeros(self.nb * max(self.env.shared_B, 1), np.uint8)
        return self._shared

    @property
    def local(self) -> np.ndarray:
        """The threads' local memory, `local_B` bytes each."""
        if self._local is None:
            self._local = np.zeros(self.n * max(self.local_B, 1), np.uint8)
        return self._local

    @property
    def bar_val(self) -> np.ndarray:
        """Each thread's predicate at a bar.red."""
        if self._bar_val is None:
            self._bar_val = np.zeros(self.n, np.bool_)
        return self._bar_val

    def thread_name(self, i: int) -> str:
        """CTA and thread coordinates of thread `i` of the batch."""
        c = tuple(int(x[i]) for x in self.ctaid)
        t = tuple(int(x[i]) for x in self.tid)
        return f"CTA {c} thread {t}"

    def index(self, sel: Any) -> np.ndarray:
        """The thread indices `sel` names."""
        return self.gidx if isinstance(sel, slice) else sel


class Kernel:
    """A kernel body compiled to one Python function per instruction."""

    def __init__(self, mod: PtxModule, body: Body) -> None:
        self.mod, self.body = mod, body
        self.name = body.name
        self.reg_dtypes = [ops.reg_dtype(r.type) for r in body.registers]
        self.reg_groups: dict[np.dtype[Any], list[int]] = {}
        for i, dt in enumerate(self.reg_dtypes):
            self.reg_groups.setdefault(dt, []).append(i)
        self.params = {p.name: p for p in mod.entries[body.name].params}
        data_offs, _ = mod.data_layout()
        self.data_offs = data_offs
        self.instrs = body.instrs
        #: (instruction, reason) of each instruction the interpreter does not support: running
        #: one faults (the rest of the kernel still runs)
        self.unsupported: list[tuple[Instr, str]] = []
        #: program counter -> (operation, predicate reader, destination writer) of bar.red
        self.bar_reds: dict[int, tuple[str, Any, Any]] = {}
        self._shared_offsets: dict[int, dict[str, int]] = {}
        compiled = [self._compile(ins, i) for i, ins in enumerate(body.instrs)]
        self.kinds = [c[0] for c in compiled]
        self.fns = [c[1] for c in compiled]
        self.targets = [c[2] for c in compiled]
        self.n = len(body.instrs)

    def _compile(self, ins: Instr, i: int) -> tuple[int, Callable[["State", Any], None], int]:
        try:
            return ops.compile_instr(self, ins, i)
        except ops.Unsupported as e:
            reason = str(e)
            self.unsupported.append((ins, reason))

            def refuse(st: "State", sel: Any) -> None:
                raise PtxFault(f"{self.name}: line {ins.line} ({ins.text}): the PTX interpreter "
                               f"does not support this instruction ({reason})")
            return K_NORMAL, ops.guarded(ins, refuse), 0

    def shared_offsets(self, shared_base: int) -> dict[str, int]:
        """Offsets of the kernel's shared variables for a layout starting at `shared_base`."""
        got = self._shared_offsets.get(shared_base)
        if got is None:
            got = self._shared_offsets[shared_base] = \
                self.mod.shared_layout(self.name, shared_base)[0]
        return got


class Grid:
    """One launch of a kernel: runs its CTAs batch by batch, in time slices (`advance`)."""

    def __init__(self, kern: Kernel, env: LaunchEnv) -> None:
        self.kern, self.env = kern, env
        bt = env.block[0] * env.block[1] * env.block[2]
        total = env.grid[0] * env.grid[1] * env.grid[2]
        per = max(1, MAX_BATCH_THREADS // max(bt, 1))
        self.batches = [range(s, min(s + per, total)) for s in range(0, total, per)]
        self.state: State | None = None
        self.shared_offsets = kern.shared_offsets(env.shared_base)
        if env.static_end > env.shared_B:
            raise PtxFault(f"{kern.name}: the kernel's static shared memory ({env.static_end} B) "
                           f"exceeds the launch's {env.shared_B} B")
        self.started = time.perf_counter()

    def advance(self, budget_s: float) -> bool:
        """Runs for up to `budget_s` seconds; True when every CTA has finished."""
        deadline = time.perf_counter() + budget_s
        while self.batches or self.state is not None:
            if self.state is None:
                self.state = State(self.kern, self.env, self.batches.pop(0))
            if not run(self.state, deadline, self.shared_offsets):
                return False
            self.state = None
        return True

    def describe(self) -> str:
        """Where the warps of the running batch are: PTX line and instruction of each group of
        warps at the same place."""
        st = self.state
        if st is None:
            return "no CTA running"
        pcs = st.pc if st.uniform_pc is None else np.full(st.n, st.uniform_pc, np.int32)
        groups: dict[tuple[int, bool], list[str]] = {}
        for w in range(0, st.n, WARP):
            sl = slice(w, min(w + WARP, st.n))
            alive = ~st.done[sl]
            if not alive.any():
                continue
            pc = int(pcs[sl][alive].min())
            key = (pc, bool(st.waiting[sl][alive].any()))
            groups.setdefault(key, []).append(f"{w // WARP}")
        out = []
        for (pc, waiting), warps in sorted(groups.items()):
            ins = self.kern.instrs[pc] if pc < self.kern.n else None
            where = f"line {ins.line}: {ins.text}" if ins is not None else "past the end"
            out.append(f"warps {_ranges(warps)} at {where}"
                       + (" (waiting at the barrier)" if waiting else ""))
        return "; ".join(out)


def _ranges(ws: list[str]) -> str:
    nums = sorted(int(w) for w in ws)
    out, start, prev = [], nums[0], nums[0]
    for x in nums[1:] + [None]:  # type: ignore[list-item]
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(out)


def run(st: State, deadline: float, shared_offsets: dict[str, int]) -> bool:
    """Runs the threads of `st` until they all exit (True) or the deadline passes (False)."""
    kern = st.kern
    fns, kinds, targets, instrs, n_ins = kern.fns, kern.kinds, kern.targets, kern.instrs, kern.n
    st.shared_offsets = shared_offsets
    live: Any = ALL if not st.started or not st.done.any() else np.nonzero(~st.done)[0]
    st.started = True
    upc: int | None = st.uniform_pc
    check = 0
    with np.errstate(all="ignore"):
        while True:
            check += 1
            if check & 63 == 0 and time.perf_counter() > deadline:
                st.uniform_pc = upc
                if upc is not None:
                    st.pc[st.index(live)] = upc
                return False
            if upc is not None:
                pc = upc
                sel = live
            else:
                runnable = ~(st.done | st.waiting)
                if not runnable.any():
                    if st.waiting.any():
                        _release_barriers(st)
                        continue
                    return True
                cand = np.where(runnable, st.pc, _BIG_PC)
                pc = int(cand.min())
                sel = np.nonzero(cand == pc)[0]
            if pc >= n_ins:
                idx = st.index(sel)
                raise PtxFault(f"{kern.name}: {st.thread_name(int(idx[0]))} ran past the end of "
                               "the kernel without ret or exit")
            st.steps += 1
            kind = kinds[pc]
            ins = instrs[pc]
            if kind == K_NORMAL:
                fns[pc](st, sel)
                if upc is not None:
                    upc += 1
                else:
                    st.pc[sel] += 1
                    upc = _converged(st)
                continue
            # control flow: which of the selected threads act (the guard)
            act = _guard(st, ins, sel)
            if kind == K_BRA:
                tgt = targets[pc]
                if upc is not None:
                    if act is None or act.all():
                        upc = tgt
                        continue
                    if not act.any():
                        upc += 1
                        continue
                    idx = st.index(sel)
                    st.pc[idx] = np.where(act, tgt, pc + 1)
                    upc = None
                    continue
                if act is None:
                    st.pc[sel] = tgt
                else:
                    st.pc[sel] = np.where(act, tgt, pc + 1)
                upc = _converged(st)
                continue
            if kind == K_EXIT:
                idx = st.index(sel)
                if act is None:
                    st.done[idx] = True
                else:
                    st.done[idx[act]] = True
                    st.pc[idx[~act]] = pc + 1
                if st.done.all():
                    return True
                live = np.nonzero(~st.done)[0]
                if upc is not None:
                    upc += 1  # the threads that stay were all at pc
                    continue
                if st.waiting.any():
                    _release_barriers(st)
                upc = _converged(st)
                continue
            if kind == K_TRAP:
                idx = st.index(sel)
                if act is not None:
                    idx = idx[act]
                if len(idx):
                    raise PtxFault(f"{kern.name}: trap at line {ins.line} "
                                   f"({st.thread_name(int(idx[0]))}, {len(idx)} threads)")
                if upc is not None:
                    upc += 1
                else:
                    st.pc[sel] += 1
                    upc = _converged(st)
                continue
            if kind == K_BAR:
                ops.check_barrier(st, ins, sel)
                red = kern.bar_reds.get(pc)
                if red is not None:
                    st.bar_val[sel] = red[1](st, sel)
                if upc is not None:
                    if red is not None:
                        idx = st.index(sel)
                        _bar_reduce(st, idx, np.full(len(idx), pc))
                    upc += 1  # every live thread arrives at once
                    continue
                st.waiting[sel] = True
                _release_barriers(st)
                upc = _converged(st)
                continue
            raise AssertionError(kind)


def _guard(st: State, ins: Instr, sel: Any) -> np.ndarray | None:
    if ins.guard is None:
        return None
    g = st.R[ins.guard[0]][sel]
    return ~g if ins.guard[1] else g


def _release_barriers(st: State) -> None:
    """Releases the CTAs all of whose threads have reached a barrier or exited."""
    arrived = (st.waiting | st.done).reshape(st.nb, st.bt).all(axis=1)
    if not arrived.any():
        return
    rel = np.repeat(arrived, st.bt) & st.waiting
    if st.kern.bar_reds:
        idx = np.nonzero(rel)[0]
        _bar_reduce(st, idx, st.pc[idx])
    st.pc[rel] += 1
    st.waiting[rel] = False


def _bar_reduce(st: State, idx: np.ndarray, pcs: np.ndarray) -> None:
    """The results of bar.red for threads `idx` (at program counters `pcs`) leaving a barrier:
    the predicate's count, and, or or over the threads of their CTA that arrived (each thread's
    own instruction says which)."""
    cta = st.cta_local[idx]
    count = np.bincount(cta, weights=st.bar_val[idx], minlength=st.nb).astype(np.uint32)
    total = np.bincount(cta, minlength=st.nb).astype(np.uint32)
    for pc, (op, _, write) in st.kern.bar_reds.items():
        at = idx[pcs == pc]
        if len(at) == 0:
            continue
        c, t = count[st.cta_local[at]], total[st.cta_local[at]]
        write(st, at, c if op == "popc" else (c == t) if op == "and" else (c > 0))


def _converged(st: State) -> int | None:
    """The common program counter when every live thread has the same one and none waits."""
    if st.waiting.any():
        return None
    pcs = st.pc[~st.done]
    if len(pcs) == 0:
        return None
    lo = pcs.min()
    return int(lo) if lo == pcs.max() else None


def fault_at(st: State, ins: Instr, sel: Any, bad: np.ndarray, what: str,
             addrs: np.ndarray | None = None) -> PtxFault:
    """A fault of the first thread in `sel` for which `bad` holds."""
    idx = st.index(sel)
    k = int(np.argmax(bad))
    va = int(addrs[k]) if addrs is not None else None
    at = f" at address {va:#x}" if va is not None else ""
    return PtxFault(f"{st.kern.name}: line {ins.line} ({ins.text}): {what}{at} "
                    f"({st.thread_name(int(idx[k]))})", va)


__all__ = ["Grid", "Kernel", "LaunchEnv", "PtxFault", "State", "fault_at"]
