"""Global wave sync: the GWS unit's semaphores and barriers (RDNA3 ISA, "Global Wave Sync").

The unit holds 64 resources, each a 12-bit counter, a flag, and a type (semaphore or barrier);
a VMID owns the range GDS_GWS_VMID.BASE/SIZE of them. A ds_gws_* op of a wave names resource
(BASE + M0[21:16] + OFFSET0[5:0]) % 64; outside the range the unit NACKs and the wave rewinds and
halts (the mock faults, naming the instruction). A `GwsRange` is that range with the resources'
state, which belongs to the unit and so outlives a dispatch; the queue's owner passes it in
`DispatchRecord.gws` (gfx11 KFD queues have none: see ops_gds).

Per wave, in wave order within a wave set (each op takes its count from the first active lane):
* init: counter = count, flag = 0.
* sema_v / sema_br: counter += 1 / count (semaphore); sema_release_all: counter += the waves
  queued at sema_p on the resource.
* sema_p: a wave passes while counter > 0 (decrementing it), else it queues; queued waves are
  released, first come first served, as the counter rises.
* barrier: counter - 1 waves wait, the next one releases them all, flips the flag and sets the
  counter to its own count for the next barrier. The ISA counts in "total waves minus one" (its
  pseudocode's decrement-then-test would release one wave early against that convention, as LLVM's
  ds.gws.barrier documentation reads it); the mock follows the convention: a wave arriving with
  counter 0 is the last.
A queued wave waits in the scheduler (`interp`) until `release` lets it go; if no running wave can
release it the dispatch faults (the hardware would hang).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .decode import Inst
from .errors import KernelFault
from .machine import WaveSet
from .ops_mem import m0_of

GWS_OPS = ("ds_gws_init", "ds_gws_sema_v", "ds_gws_sema_br", "ds_gws_sema_p",
           "ds_gws_sema_release_all", "ds_gws_barrier")
N_GWS = 64             # resources of the unit
COUNTER_MASK = 0xFFF   # 12-bit counters


def gws_resource_ids(g: WaveSet, offset0: int) -> np.ndarray:
    """Each wave's virtual GWS resource id, (M0[21:16] + OFFSET0[5:0]) % 64 (the unit adds the
    VMID's base)."""
    return ((m0_of(g) >> np.uint32(16)) + np.uint32(offset0 & 0x3F)) & np.uint32(N_GWS - 1)


@dataclass
class GwsResource:
    """One sync resource's state."""

    counter: int = 0
    flag: int = 0
    barrier: bool = False          # type: barrier, else semaphore
    queue: deque[int] = field(default_factory=deque)   # tickets of waves waiting at sema_p


@dataclass
class GwsRange:
    """The GWS resources a queue's VMID owns (GDS_GWS_VMID BASE and SIZE) and the unit's state."""

    base: int = 0
    size: int = N_GWS
    resources: list[GwsResource] = field(
        default_factory=lambda: [GwsResource() for _ in range(N_GWS)])
    next_ticket: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.base < N_GWS and 0 < self.size <= N_GWS):
            raise ValueError(f"GWS range base {self.base} size {self.size}: the unit has "
                             f"{N_GWS} resources")

    def owns(self, rid: int) -> bool:
        return (rid - self.base) % N_GWS < self.size

    def drop_waiters(self) -> None:
        """Forgets the waves queued at sema_p (their dispatch ended in a fault: the unit's FIFO
        no longer holds them, so later waves must not queue behind them)."""
        for r in self.resources:
            r.queue.clear()


@dataclass
class Blocked:
    """Waves (bool per row of the wave set) that an op left waiting, and what releases them: a
    function of the waiting wave set giving the rows released now."""

    rows: np.ndarray
    release: Callable[[WaveSet], np.ndarray]
    rid: int


GwsExec = Callable[[WaveSet], "Blocked | None"]


def _waves(g: WaveSet) -> tuple[int, int]:
    """(waves, rows per wave) of a wave set."""
    per = 2 if g.m.wave64 else 1
    return g.n // per, per


def _first_lane_values(g: WaveSet, reg: int) -> list[int | None]:
    """Per wave: VGPR `reg` of its first active lane (None when EXEC is empty)."""
    n, per = _waves(g)
    vals = g.v(reg).reshape(n, per * 32)
    ex = g.exec.reshape(n, per * 32)
    out: list[int | None] = []
    for w in range(n):
        on = np.flatnonzero(ex[w])
        out.append(int(vals[w, on[0]]) if len(on) else None)
    return out


def compile_gws(inst: Inst) -> GwsExec:
    """ds_gws_*: the step function; it returns None or the waves it left waiting."""
    name, f = inst.name, inst.f

    def fault(msg: str) -> KernelFault:
        return KernelFault(msg, address=inst.addr, instruction=str(inst))

    def resolve(g: WaveSet) -> tuple[GwsRange, list[int]]:
        gws = g.m.gws
        n, per = _waves(g)
        rids = gws_resource_ids(g, f["offset0"])[::per]
        if gws is None:
            rid = int(rids[0])
            raise fault(f"GWS resource {rid} (M0[21:16] + OFFSET0) is outside this "
                              "queue's GWS range, which is empty: gfx11 KFD gives a compute "
                              "VMID no GWS (AMDKFD_IOC_ALLOC_QUEUE_GWS only makes the queue "
                              "exclusively scheduled); the hardware NACKs, rewinds the wave and "
                              "halts it, a hang")
        out = [(gws.base + int(r)) % N_GWS for r in rids]
        for rid in out:
            if not gws.owns(rid):
                raise fault(f"GWS resource {rid} is outside this queue's GWS range "
                                  f"[{gws.base}, {gws.base + gws.size}): the hardware NACKs, "
                                  "rewinds the wave and halts it, a hang")
        return gws, out

    def counts(g: WaveSet) -> list[int]:
        vals = _first_lane_values(g, f["addr"])
        if any(v is None for v in vals):
            raise fault(f"{name} with EXEC empty: the ISA takes the count from the first "
                              "active lane")
        return [int(v) for v in vals]   # type: ignore[arg-type]  # None excluded above

    def expand(g: WaveSet, per_wave: np.ndarray) -> np.ndarray:
        return np.repeat(per_wave, _waves(g)[1])

    if name == "ds_gws_init":
        def init(g: WaveSet) -> Blocked | None:
            gws, rids = resolve(g)
            for rid, c in zip(rids, counts(g)):
                r = gws.resources[rid]
                r.counter, r.flag = c & COUNTER_MASK, 0
            return None
        return init
    if name in ("ds_gws_sema_v", "ds_gws_sema_br", "ds_gws_sema_release_all"):
        def signal(g: WaveSet) -> Blocked | None:
            gws, rids = resolve(g)
            adds = counts(g) if name == "ds_gws_sema_br" else [1] * len(rids)
            for rid, add in zip(rids, adds):
                r = gws.resources[rid]
                if name == "ds_gws_sema_release_all":
                    add = len(r.queue)
                r.barrier = False
                r.counter = (r.counter + add) & COUNTER_MASK
            return None
        return signal
    if name == "ds_gws_sema_p":
        return _sema_p(resolve, expand)
    if name == "ds_gws_barrier":
        return _barrier(resolve, counts, expand)
    raise fault(f"{name} is not a GWS instruction")


def _sema_p(resolve: Callable[[WaveSet], tuple[GwsRange, list[int]]],
            expand: Callable[[WaveSet, np.ndarray], np.ndarray]) -> GwsExec:
    def sema_p(g: WaveSet) -> Blocked | None:
        gws, rids = resolve(g)
        waiting = np.zeros(len(rids), dtype=bool)
        tickets: dict[int, int] = {}
        for w, rid in enumerate(rids):
            r = gws.resources[rid]
            r.barrier = False
            if r.counter > 0 and not r.queue:
                r.counter -= 1
            else:
                waiting[w] = True
                tickets[w] = gws.next_ticket
                r.queue.append(gws.next_ticket)
                gws.next_ticket += 1
        if not waiting.any():
            return None
        order = [tickets[int(w)] for w in np.flatnonzero(waiting)]
        rid_of = {tickets[w]: rids[w] for w in tickets}

        def release(h: WaveSet) -> np.ndarray:
            # h holds the waiting waves in the order they queued (a split keeps wave order).
            go = np.zeros(len(order), dtype=bool)
            for k, t in enumerate(order):
                r = gws.resources[rid_of[t]]
                if t in r.queue and r.queue[0] == t and r.counter > 0:
                    r.counter -= 1
                    r.queue.popleft()
                    go[k] = True
            if go.any():
                order[:] = [t for t, gone in zip(order, go) if not gone]
            return expand(h, go)
        return Blocked(expand(g, waiting), release, rids[int(np.argmax(waiting))])
    return sema_p


def _barrier(resolve: Callable[[WaveSet], tuple[GwsRange, list[int]]],
             counts: Callable[[WaveSet], list[int]],
             expand: Callable[[WaveSet, np.ndarray], np.ndarray]) -> GwsExec:
    def barrier(g: WaveSet) -> Blocked | None:
        gws, rids = resolve(g)
        nxt = counts(g)
        waiting = np.zeros(len(rids), dtype=bool)
        tags: list[tuple[int, int]] = []
        for w, rid in enumerate(rids):
            r = gws.resources[rid]
            r.barrier = True
            if r.counter == 0:       # the last wave: release the others, arm the next barrier
                r.flag ^= 1
                r.counter = nxt[w] & COUNTER_MASK
            else:
                r.counter -= 1
                waiting[w] = True
                tags.append((rid, r.flag))
        if not waiting.any():
            return None

        def release(h: WaveSet) -> np.ndarray:
            go = np.array([gws.resources[rid].flag != flag for rid, flag in tags], dtype=bool)
            if go.any():
                tags[:] = [t for t, gone in zip(tags, go) if not gone]
            return expand(h, go)
        return Blocked(expand(g, waiting), release, tags[0][0])
    return barrier


# -- the scheduler's side (interp) ----------------------------------------------------------------
def release_waiting(wave_sets: list[WaveSet]) -> None:
    """Lets the queued waves that their resource now releases go on (they wait after the op,
    so they resume at the next instruction); a wave set released in part is split."""
    changed = True
    while changed:
        changed = False
        for g in [h for h in wave_sets if h.waiting is not None]:
            blocked = g.waiting
            assert blocked is not None
            go = blocked.release(g)
            if not go.any():
                continue
            changed = True
            if go.all():
                g.waiting = None
                continue
            a, rest = g.split(go, g.pc, g.pc)
            rest.waiting = blocked
            wave_sets.remove(g)
            wave_sets += [a, rest]


def pass_free_barriers(wave_sets: list[WaveSet]) -> bool:
    """When nothing can run: the waves at s_barrier whose workgroup has no wave queued at a GWS
    resource pass it (all their workgroup's waves arrived or ended). False if none could."""
    queued = [g for g in wave_sets if g.waiting is not None]
    if not queued:
        return False
    m = queued[0].m
    blocked_wgs = np.unique(np.concatenate([m.wave_wg[g.wave_ids()] for g in queued]))
    passed = False
    for g in [h for h in wave_sets if h.at_barrier]:
        free = ~np.isin(m.wave_wg[g.wave_ids()], blocked_wgs)
        if not free.any():
            continue
        passed = True
        if free.all():
            g.at_barrier = False
            g.pc += 1
            continue
        a, rest = g.split(free, g.pc + 1, g.pc)
        rest.at_barrier = True
        wave_sets.remove(g)
        wave_sets += [a, rest]
    return passed
