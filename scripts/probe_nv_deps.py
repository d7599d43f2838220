"""How to start a grid after the previous one on a real NVIDIA GPU: each candidate mechanism timed
and checked for correctness, through the runtime's own building blocks (QMD builder, methods,
channel).

Mechanisms (what sits between launch i and launch i+1 of a chain) are combinations of the knobs
`MECHS` documents: host fences (WAIT_FOR_IDLE, semaphore acquires), the predecessor's dependent-QMD
link (SCHEDULE: only the first QMD is sent, the compute engine starts each next one when the one
before completes; or a dependence counter), the completion barrier's scope and its task chasing,
which caches a grid invalidates when it starts, Hopper's QMD latches (a grid waits on a latch its
predecessor arrives at), and programmatic dependent launch (the latch arrives when the producer's
last CTA is launched; kernels that begin with griddepcontrol.wait). "none" is the lower bound (grids
may overlap: not a correct chain).
Each runs in "graph" form (one bound command buffer of N launches, one GPFIFO entry) and the
cheap ones also in "stream" form (one GPFIFO entry per launch, with a progress release after each,
as back-to-back launches on one stream are submitted).

Per mechanism: wall time of N dependent launches of a tiny kernel (4x256 threads, x[i] += 1),
submission to completion seen by the CPU, median of replays, with the GPU's own time from the
timestamps; and correctness: a chain y[i] = x[n-1-i] + 1 alternating two buffers at a size that
fills the GPU, thousands of launches, every element compared. Each mechanism runs in a child
process of its own (a mechanism the GPU rejects or that never completes costs only its child).

    python scripts/probe_nv_deps.py [--n 1000] [--chain-replays 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SRC = r"""
extern "C" __global__ void inc(unsigned *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
extern "C" __global__ void step(const unsigned *src, unsigned *dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[n - 1 - i] + 1;
}
"""
# The same kernels beginning with griddepcontrol.wait (PTX ISA 7.8, sm_90): a grid launched before
# its prerequisite grid completed waits there until that grid completed and its memory operations
# are performed and visible; in a grid launched the ordinary way it returns at once.
SRC_WAIT = SRC.replace("int i = blockIdx.x", 'asm volatile("griddepcontrol.wait;" ::: "memory");\n'
                       "  int i = blockIdx.x")
# ... and kernels that first let their own dependents launch (griddepcontrol.launch_dependents:
# the programmatic-dependent-launch trigger), then wait.
SRC_TRIGGER = SRC.replace("int i = blockIdx.x",
                          'asm volatile("griddepcontrol.launch_dependents;");\n'
                          '  asm volatile("griddepcontrol.wait;" ::: "memory");\n'
                          "  int i = blockIdx.x")

# What separates launch i from launch i+1, as knobs (how the QMDs reach the GPU is the form's):
#   fence   commands before launch i > 0: wfi, wfi_inv, sem_host, sem_compute
#   link    the predecessor's DEPENDENT_QMD: schedule (action SCHEDULE, only the first QMD is
#           sent), icopy (action INVALIDATE_COPY_SCHEDULE), counter (every QMD sent, the
#           successor has DEPENDENCE_COUNTER 1, the predecessor decrements it)
#   membar  CWD_MEMBAR_TYPE of grids that have a successor (default L1_SYSMEMBAR everywhere)
#   chase   CWD_MEMBAR_TASK_CHASING_ENABLE on every grid
#   notex   no texture header / sampler invalidation on grids after the first
#   nodinv  no shader-data / texture-data (L1) invalidation on grids after the first
#   nocb    no constant bank 0 invalidation on grids after the first
#   nopf    no prefetch of the dependent QMD
#   cbpf    constant bank 0 prefetched before the CTAs launch (CONSTANT_BUFFER_PREFETCH PRE)
#   noauto  DISABLE_AUTO_INVALIDATE on grids after the first
#   latch   every QMD sent; grid i arrives at a latch when it completes, grid i+1 waits on it:
#           seq (latch id i + 1) or fixed (id 7)
#   pdl     latch arrival at the producer's pre-exit, when its last CTA is launched
#           (ENABLE_PROGRAM_PRE_EXIT, PRE_EXIT_AT_LAST_CTA_LAUNCH), with kernels that begin with
#           griddepcontrol.wait (programmatic dependent launch)
#   wait    kernels that begin with griddepcontrol.wait
#   trigger kernels that begin with griddepcontrol.launch_dependents, then wait
#   l1chase grids that have a successor complete with a GPU-scope barrier (L1_MEMBAR) and task
#           chasing, the last one with the system-scope barrier (CUDA's graphs)
#   nextcb  a grid that has a successor prefetches the successor's constant bank 0 when it
#           completes (its constant buffer 5 names that bank, CONSTANT_BUFFER_PREFETCH POST)
#   nextprog  ... and the successor's program (PROGRAM_PREFETCH_TYPE POST)
#   nopre   no constant bank 0 prefetch before the CTAs launch (the runtime's template has one)
#   selfcopy  SELF_COPY_ON_COMPLETION on every grid
#   gate    stream form of CUDA's stream launches: launch i also sends a null QMD N_i (QMD_TYPE
#           GRID_NULL, DEPENDENCE_COUNTER `gate`) that schedules launch i + 1's QMD; grid i
#           decrements N_i's counter when it completes (DEPENDENT_QMD action
#           DECREMENT_DEPENDENCE); both QMDs are sent with PCAS action 10, no fence
#   gring   stream launches ordered by a ring of gates (null QMDs) instead of WAIT_FOR_IDLE: grid
#           i decrements its gate G_i when it completes (DEPENDENT_QMD action DECREMENT_DEPENDENCE,
#           no pre-exit: after its completion barrier); launch i + 1's segment decrements G_i
#           from the pushbuffer (SEND_PCAS_A of G_i, SEND_SIGNALING_PCAS2_B action `dec`: 7
#           DECREMENT_DEPENDENCE, or 10 as CUDA sends its nulls); G_i (DEPENDENCE_COUNTER 2) fires
#           when both happened and starts launch i + 1's QMD with action `gring` (icopy or
#           schedule); only launch 0 is sent directly. Every grid releases its own semaphore
#           value, as the runtime's timeline (`tl`). `ring` R: the CPU copies each launch's QMD
#           into one of R fixed slots and rewrites the slot's gate as it submits (a slot and
#           gate reused once the launch after their last user completed), each launch its own
#           submission; `delay`: launch i + 1 submitted only after launch i completed (the
#           gate's kernel decrement comes first). Without `ring`: every QMD and gate prebuilt.
#           `close`: the last gate is released (it starts a null QMD) before the end's WFI
#           release; without, the last gate is left pending when the channel waits for idle.
#           `gnopf`: the grid's
#           link does not prefetch its gate; `gself`: gates have SELF_COPY_ON_COMPLETION.
#           On the H200 a decrement of a gate the compute engine has not loaded underflows
#           (Xid 13, SKEDCHECK36_DEPENDENCE_COUNTER_UNDERFLOW). `gload` A: launch i's segment
#           first sends G_i with PCAS action A, before it decrements G_{i-1} (action 10 loads the
#           gate: its count goes to HW_ONLY_DEPENDENCE_COUNTER, and it does not start; correct
#           on the H200); `ghw` n: the gate is written with HW_ONLY_DEPENDENCE_COUNTER n instead
#           (no load; not run on the H200 yet)
#   tl      every grid releases its own value (the runtime's timeline, QMD release 0); the last
#           one releases the end of the chain instead
#   gsem    only the gate's semantics (single submissions, each checked within a second)
#   presend grids after the first have REQUIRE_SCHEDULING_PCAS (a SEND_PCAS only loads them; their
#           predecessor's link starts them) and are all sent, last first, before the first grid
#           (as CUDA's graph upload sends them; here every replay does)
#   pdlc    programmatic dependent launch as CUDA's PDL graphs write it: a grid that has a successor
#           lets its link fire at its pre-exit (ENABLE_PROGRAM_PRE_EXIT) and arrives at latch
#           i + 1 when it completes; its successor waits on that latch in griddepcontrol.wait,
#           invalidating L1 when it acquires it (kernels that wait: `wait`)
#   lastcta with pdlc: a producer's pre-exit (and so its link) fires when its last CTA is
#           launched (PRE_EXIT_AT_LAST_CTA_LAUNCH), as if every CTA began with
#           griddepcontrol.launch_dependents
#   runnable  with clone: the first grid without REQUIRE_SCHEDULING_PCAS, no self copy, no
#           prefetch of the successor's bank (its address is not cloned)
#   clone   the fields CUDA itself writes into the QMDs of a kind of launch (read from CUDA's own
#           process by scripts/sniff_cuda_launches.py, --cuda-fields): every field that is not the
#           kernel's, the shape's or an address; the link, if CUDA's QMDs name dependents, with
#           CUDA's action and prefetch; without one, `fence` (default WAIT_FOR_IDLE)
MECHS: dict[str, dict[str, Any]] = {
    "wfi": {"fence": "wfi"},
    "wfi_inv": {"fence": "wfi_inv"},
    "wfi_lean": {"fence": "wfi", "notex": True, "chase": True, "cbpf": True},
    "none": {},
    "sem_host": {"fence": "sem_host", "sem": True},
    "sem_compute": {"fence": "sem_compute", "sem": True},
    "qmd_counter": {"link": "counter"},
    "qmd_schedule": {"link": "schedule"},
    "qmd_schedule_gpu": {"link": "schedule", "membar": "L1_MEMBAR"},
    "qmd_schedule_nomembar": {"link": "schedule", "membar": "L1_NONE"},
    "qmd_chase": {"link": "schedule", "chase": True},
    "qmd_notex": {"link": "schedule", "notex": True},
    "qmd_nodinv": {"link": "schedule", "nodinv": True},
    "qmd_nocb": {"link": "schedule", "nocb": True},
    "qmd_nopf": {"link": "schedule", "nopf": True},
    "qmd_noauto": {"link": "schedule", "noauto": True},
    "qmd_icopy": {"link": "icopy"},
    "qmd_cbpf": {"link": "schedule", "cbpf": True},
    "qmd_lean": {"link": "schedule", "notex": True, "chase": True, "cbpf": True},
    "qmd_lean_nomembar": {"link": "schedule", "notex": True, "cbpf": True, "membar": "L1_NONE"},
    "qmd_wait_kernel": {"link": "schedule", "wait": True},
    "latch_seq": {"latch": "seq"},
    "latch_fixed": {"latch": "fixed"},
    "pdl": {"link": "schedule", "latch": "fixed", "pdl": True, "wait": True},
    "pdl_nolink": {"latch": "fixed", "pdl": True, "wait": True},
    "qmd_l1chase": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True},
    "qmd_nextcb": {"link": "schedule", "nextcb": True, "nocb": True},
    "qmd_nextcb_inv": {"link": "schedule", "nextcb": True},
    "qmd_nextprog": {"link": "schedule", "nextprog": True},
    "qmd_selfcopy": {"link": "schedule", "selfcopy": True},
    "qmd_recipe": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True, "nextcb": True,
                   "nocb": True},
    "qmd_cudalike": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True, "nextcb": True,
                     "nocb": True, "nextprog": True},
    "qmd_cudalike_nopre": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True,
                           "nextcb": True, "nocb": True, "nextprog": True, "nopre": True},
    "qmd_presend": {"link": "schedule", "presend": True},
    "qmd_presend_selfcopy": {"link": "schedule", "presend": True, "selfcopy": True},
    "qmd_cuda_full": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True, "nextcb": True,
                      "nocb": True, "nextprog": True, "nopre": True, "presend": True,
                      "selfcopy": True},
    "pdl_cuda": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True, "pdlc": True,
                 "presend": True, "wait": True},
    "pdl_cuda_trigger": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True, "pdlc": True,
                         "presend": True, "wait": True, "trigger": True},
    "pdl_cuda_nopresend": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True,
                           "pdlc": True, "wait": True},
    # what `Launch(early_start=True)` writes, with kernels that trigger first (the measured
    # `pdl_cuda_trigger` had its QMDs sent ahead, which `pdl_cuda` showed to cost)
    "pdl_cuda_nopresend_trigger": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True,
                                   "pdlc": True, "wait": True, "trigger": True},
    "pdl_lastcta": {"link": "schedule", "membar": "L1_MEMBAR", "chase": True, "pdlc": True,
                    "wait": True, "lastcta": True},
    "gate_ring": {"gring": "icopy", "dec": 7, "tl": True, "close": True},
    "gate_ring_noinv": {"gring": "schedule", "dec": 7, "tl": True, "close": True},
    "gate_ring_nopf": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "gnopf": True},
    "gate_ring_self": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "gself": True},
    "gate_ring_pcas10": {"gring": "icopy", "dec": 10, "tl": True, "close": True},
    "gate_ring_pending": {"gring": "icopy", "dec": 7, "tl": True},
    "gate_ring_live": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "ring": 7},
    "gate_ring_delay": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "ring": 7,
                        "delay": True},
    "gate_ring_delay_noinv": {"gring": "schedule", "dec": 7, "tl": True, "close": True,
                              "ring": 7, "delay": True},
    "gate_load": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "gload": 10},
    "gate_load_noinv": {"gring": "schedule", "dec": 7, "tl": True, "close": True, "gload": 10},
    "gate_load_pending": {"gring": "icopy", "dec": 7, "tl": True, "gload": 10},
    "gate_load_live": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "gload": 10,
                       "ring": 7},
    "gate_load_delay": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "gload": 10,
                        "ring": 7, "delay": True},
    "gate_load_delay_noinv": {"gring": "schedule", "dec": 7, "tl": True, "close": True,
                              "gload": 10, "ring": 7, "delay": True},
    "gate_load_notl": {"gring": "icopy", "dec": 7, "close": True, "gload": 10},
    "gate_load_l1": {"gring": "icopy", "dec": 7, "close": True, "gload": 10,
                     "membar": "L1_MEMBAR", "chase": True},
    "wfi_tl": {"fence": "wfi", "tl": True},
    "wfi_l1": {"fence": "wfi", "notex": True, "chase": True, "cbpf": True,
               "membar": "L1_MEMBAR"},
    "gate_hw": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "ghw": 2},
    "gate_hw_delay": {"gring": "icopy", "dec": 7, "tl": True, "close": True, "ghw": 2,
                      "ring": 7, "delay": True},
    "gate_sem": {"gsem": True},
    "gate1": {"gate": 1},
    "gate2": {"gate": 2},
    "cuda_graph": {"clone": "graph"},
    "cuda_stream": {"clone": "stream"},
    "cuda_pdl_graph": {"clone": "pdl_graph", "wait": True},
    "cuda_pdl_trigger_graph": {"clone": "pdl_trigger_graph", "wait": True, "trigger": True},
    "cuda_graph_run": {"clone": "graph", "runnable": True, "presend": True},
    "cuda_pdl_graph_run": {"clone": "pdl_graph", "wait": True, "runnable": True, "presend": True},
    "cuda_pdl_trigger_graph_run": {"clone": "pdl_trigger_graph", "wait": True, "trigger": True,
                                   "runnable": True, "presend": True},
    "cuda_pdl_wait": {"clone": "pdl_wait", "wait": True, "fence": "none"},
    "cuda_pdl_trigger": {"clone": "pdl_trigger", "wait": True, "trigger": True, "fence": "none"},
}
CLONE_LINKS = {"QMD_SCHEDULE": "schedule", "QMD_INVALIDATE_COPY_SCHEDULE": "icopy",
               "QMD_DECREMENT_DEPENDENCE": "counter"}
GRAPH = ["wfi", "none", "qmd_schedule", "qmd_schedule_nomembar", "qmd_chase", "qmd_notex",
         "qmd_nodinv", "qmd_nocb", "qmd_nopf", "qmd_noauto", "qmd_icopy", "qmd_cbpf", "qmd_lean",
         "qmd_lean_nomembar", "qmd_wait_kernel", "latch_seq", "latch_fixed", "pdl", "pdl_nolink"]
# stream:qmd_schedule bounds what a stream could reach if its launches could be linked (each its
# own GPFIFO entry, started by its predecessor's link)
STREAM = ["wfi", "wfi_lean", "none", "qmd_schedule", "latch_seq", "latch_fixed", "pdl_nolink"]
# the gate ring's mechanisms, run with --only stream:NAME
GATES = ["gate_ring", "gate_ring_noinv", "gate_ring_nopf", "gate_ring_self", "gate_ring_pcas10",
         "gate_ring_pending", "gate_ring_live", "gate_ring_delay", "gate_ring_delay_noinv",
         "gate_load", "gate_load_noinv", "gate_load_pending", "gate_load_live", "gate_load_delay",
         "gate_load_delay_noinv", "gate_load_notl", "gate_load_l1", "wfi_tl", "wfi_l1", "gate_hw",
         "gate_hw_delay", "gate_sem"]
CHAIN_N = 1 << 21          # elements per chain buffer: 8192 blocks of 256, several waves on an H200
LATCH_FIXED = 7
CUDA_PCAS = 10  # INVALIDATE_PREFETCH_COPY_SCHEDULE: the action CUDA sends every QMD with


def resolve_clone(k: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """Mechanism `k` with its `clone` kind's fields (`fields`: what --cuda-fields holds) as
    `clone_fields` (linked, last), and CUDA's link: its action and prefetch if its QMDs name
    dependents, else the mechanism's fence (default WAIT_FOR_IDLE). Raises KeyError if the sniff
    found no QMD of that kind."""
    from runtime.drivers.nv.qmd import QMDV04
    f = fields[k["clone"]]
    k = {**k, "clone_fields": (f["linked"], f["last"])}
    if f["linked"].get("DEPENDENT_QMD_ENABLE(0)"):
        action = f["linked"].get("DEPENDENT_QMD_ACTION(0)", 0)
        k["link"] = next(v for n, v in CLONE_LINKS.items()
                         if QMDV04.value("DEPENDENT_QMD_ACTION_" + n) == action)
        k["nopf"] = not f["linked"].get("DEPENDENT_QMD_PREFETCH(0)")
    else:
        k.setdefault("fence", "wfi")
    return k


def _set_named(q: Any, name: str, value: int) -> None:
    """Sets a field by its decoded name ("CONSTANT_BUFFER_INVALIDATE(0)" or "QMD_TYPE")."""
    if name.endswith(")"):
        base, idx = name[:-1].split("(")
        q.set(base, value, int(idx))
    else:
        q.set(name, value)


def clone_fields(q: Any, src: dict[str, int], first: bool) -> None:
    """Every clonable field of `q` (sniff_cuda_launches.clonable) set to `src`'s value (0 where
    `src` has none); the first grid of a chain counts no dependence, and only slot 0 links."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from sniff_cuda_launches import clonable
    for name, _ in type(q).all_fields():
        if clonable(name) and not name.startswith("DEPENDENT_QMD"):
            _set_named(q, name, src.get(name, 0))
    if first:
        q.set("DEPENDENCE_COUNTER", 0)


NEXT_CB_SLOT = 5  # the constant buffer slot CUDA names its successor's bank in


def shape_qmd(k: dict[str, Any], i: int, q: Any, next_qva: int | None, sem_va: int,
              next_cb: tuple[int, int] | None = None) -> None:
    """Writes mechanism `k`'s fields (`MECHS`) into QMD `q` of launch i of a chain; `next_qva` is
    the next launch's QMD address (None for the last launch), `next_cb` its constant bank 0
    (address, size), `sem_va` the semaphore the sem_* mechanisms release."""
    later = i > 0
    if k.get("nopre"):
        q.set("CONSTANT_BUFFER_PREFETCH", 0, 0)
        q.set("CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8", 0)
    if k.get("selfcopy"):
        q.set("SELF_COPY_ON_COMPLETION", 1)
    if later and k.get("presend"):
        q.set("REQUIRE_SCHEDULING_PCAS", 1)
    if k.get("pdlc"):
        if next_qva is not None:
            q.write(ENABLE_PROGRAM_PRE_EXIT=1, ARRIVE_AT_LATCH_VALID=1, ARRIVE_AT_LATCH_ID=i + 1)
            if k.get("lastcta"):
                q.write(PRE_EXIT_AT_LAST_CTA_LAUNCH=1)
        if later:
            q.write(WAIT_ON_LATCH_VALID=1, WAIT_ON_LATCH_ID=i,
                    LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE=1,
                    LATCH_ACQUIRE_INVALIDATE_TEXTURE_DATA_CACHE=1)
    if next_qva is not None and k.get("nextcb") and next_cb is not None:
        q.set_cbuf(NEXT_CB_SLOT, *next_cb)
        q.set("CONSTANT_BUFFER_PREFETCH", q.value("CONSTANT_BUFFER_PREFETCH_PREFETCH_POST"),
              NEXT_CB_SLOT)
    if next_qva is not None and k.get("nextprog"):
        q.set("PROGRAM_PREFETCH_TYPE", q.value("PROGRAM_PREFETCH_TYPE_PREFTECH_POST"))
    if k.get("clone_fields"):
        linked, last = k["clone_fields"]
        clone_fields(q, linked if next_qva is not None else last, first=not later)
        if k.get("runnable"):
            # what kept the plain clones from running: a first grid that waits for a scheduling
            # PCAS (CUDA's head QMD, a grid of no CTAs, carries none), the self copy that stopped
            # the channel, and a prefetch of a constant bank whose address is not cloned
            if not later:
                q.set("REQUIRE_SCHEDULING_PCAS", 0)
            q.set("SELF_COPY_ON_COMPLETION", 0)
            q.set("CONSTANT_BUFFER_PREFETCH", 0, NEXT_CB_SLOT)
    if k.get("sem"):
        q.set_release(1, sem_va, i + 1)
    if k.get("tl"):  # the runtime's timeline: every grid releases its own value
        q.set_release(0, sem_va, i + 1)
    if k.get("chase"):
        q.set("CWD_MEMBAR_TASK_CHASING_ENABLE", 1)
    if later and k.get("notex"):
        q.write(INVALIDATE_TEXTURE_HEADER_CACHE=0, INVALIDATE_TEXTURE_SAMPLER_CACHE=0)
    if later and k.get("nodinv"):
        q.write(INVALIDATE_TEXTURE_DATA_CACHE=0, INVALIDATE_SHADER_DATA_CACHE=0)
    if later and k.get("nocb"):
        q.set("CONSTANT_BUFFER_INVALIDATE", 0, 0)
    if later and k.get("noauto"):
        q.set("DISABLE_AUTO_INVALIDATE", 1)
    if k.get("cbpf"):
        size_B = q.get("CONSTANT_BUFFER_SIZE_SHIFTED4", 0) * 16
        q.set("CONSTANT_BUFFER_PREFETCH", q.value("CONSTANT_BUFFER_PREFETCH_PREFETCH_PRE"), 0)
        q.set("CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8", min(-(-size_B // 256), 63))
    if next_qva is not None:
        if k.get("membar"):
            q.set("CWD_MEMBAR_TYPE", q.value("CWD_MEMBAR_TYPE_" + k["membar"]))
        link = k.get("link", "")
        if link:
            action = {"schedule": "QMD_SCHEDULE", "icopy": "QMD_INVALIDATE_COPY_SCHEDULE",
                      "counter": "QMD_DECREMENT_DEPENDENCE"}[link]
            q.set("DEPENDENT_QMD_ENABLE", 1, 0)
            q.set("DEPENDENT_QMD_ACTION", q.value("DEPENDENT_QMD_ACTION_" + action), 0)
            q.set("DEPENDENT_QMD_PREFETCH", 0 if k.get("nopf") else 1, 0)
            q.set("DEPENDENT_QMD0_POINTER", next_qva >> 8)
        if k.get("latch"):
            q.write(ARRIVE_AT_LATCH_VALID=1, ARRIVE_AT_LATCH_ID=latch_id(k, i))
            if k.get("pdl"):
                q.write(ENABLE_PROGRAM_PRE_EXIT=1, PRE_EXIT_AT_LAST_CTA_LAUNCH=1)
    if later and k.get("link") == "counter":
        q.set("DEPENDENCE_COUNTER", 1)
    if later and k.get("latch"):
        q.write(WAIT_ON_LATCH_VALID=1, WAIT_ON_LATCH_ID=latch_id(k, i - 1))


def null_qmd(qcls: Any, counter: int, next_qva: int | None, action: str = "QMD_SCHEDULE",
             selfcopy: bool = True) -> Any:
    """CUDA's gate between two stream launches: a QMD of no grid (GRID_NULL) that waits for
    `counter` decrements, then starts the QMD at `next_qva` with `action` (the fields CUDA
    writes; `selfcopy`: SELF_COPY_ON_COMPLETION, as CUDA's)."""
    q = qcls()
    q.write(QMD_MAJOR_VERSION=qcls.major, QMD_TYPE=q.value("QMD_TYPE_GRID_NULL"),
            CTA_THREAD_DIMENSION0=1, CTA_THREAD_DIMENSION1=1, CTA_THREAD_DIMENSION2=1,
            REGISTER_COUNT=8, SAMPLER_INDEX=1, SELF_COPY_ON_COMPLETION=int(selfcopy),
            DEPENDENCE_COUNTER=counter)
    if next_qva is not None:
        q.set("DEPENDENT_QMD_ENABLE", 1, 0)
        q.set("DEPENDENT_QMD_ACTION", q.value("DEPENDENT_QMD_ACTION_" + action), 0)
        q.set("DEPENDENT_QMD0_POINTER", next_qva >> 8)
    return q


GATE_ACTIONS = {"icopy": "QMD_INVALIDATE_COPY_SCHEDULE", "schedule": "QMD_SCHEDULE"}


def gate_of(qcls: Any, k: dict[str, Any], next_qva: int | None) -> Any:
    """Mechanism `k`'s gate (`gring`): two decrements, then it starts `next_qva`'s QMD; with no
    successor (None) it starts nothing."""
    q = null_qmd(qcls, 2, next_qva, GATE_ACTIONS[k["gring"]], bool(k.get("gself")))
    if k.get("ghw"):
        q.set("HW_ONLY_DEPENDENCE_COUNTER", k["ghw"])
    return q


def link_gate(q: Any, k: dict[str, Any], gate_va: int) -> None:
    """Grid `q` decrements its gate at `gate_va` when it completes."""
    q.set("DEPENDENT_QMD_ENABLE", 1, 0)
    q.set("DEPENDENT_QMD_ACTION", q.value("DEPENDENT_QMD_ACTION_QMD_DECREMENT_DEPENDENCE"), 0)
    q.set("DEPENDENT_QMD_PREFETCH", 0 if k.get("gnopf") else 1, 0)
    q.set("DEPENDENT_QMD0_POINTER", gate_va >> 8)


def cbuf0_of(q: Any) -> tuple[int, int]:
    """(address, size) of a QMD's constant bank 0."""
    lo, hi, shift = type(q).cbuf_addr_fields(0)
    data = q.data
    lo_w = int.from_bytes(data[4 * lo.index:4 * lo.index + 4], "little")
    hi_w = int.from_bytes(data[4 * hi.index:4 * hi.index + 4], "little")
    addr = (((lo_w >> lo.shift) & lo.mask) | ((hi_w >> hi.shift) & hi.mask) << 32) << shift
    return addr, q.get("CONSTANT_BUFFER_SIZE_SHIFTED4", 0) * 16


def sends_every_qmd(k: dict[str, Any]) -> bool:
    """Whether every launch of mechanism `k` is sent with SEND_PCAS (else only the first: the
    others are started by their predecessor's dependent-QMD link)."""
    return k.get("link", "") not in ("schedule", "icopy")


def latch_id(k: dict[str, Any], i: int) -> int:
    """The latch launch i of a chain arrives at."""
    return LATCH_FIXED if k.get("latch") == "fixed" else i + 1


def run_child(mode: str, mech: str, args: argparse.Namespace) -> None:
    """One mechanism in one form: prints a JSON line (and, for latch mechanisms, a second one with
    what a latch does when its grid completed before the waiter was sent, or never arrives)."""
    import faulthandler
    faulthandler.dump_traceback_later(args.child_timeout - 5, exit=True)
    import numpy as np
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.gpfifo import (SEM_ACQUIRE_GEQ_64, SEM_RELEASE_64,
                                           SEM_RELEASE_WFI_TS, host_semaphore)
    from runtime.drivers.nv.methods import SUBC_COMPUTE, fval, nvm
    from runtime.hcq.memory import MemKind, round_up

    k = MECHS[mech]
    if k.get("clone"):
        k = resolve_clone(k, json.loads(Path(args.cuda_fields).read_text()))
        print("JSON" + json.dumps({"clone": {n: v for n, v in k.items() if n != "clone_fields"},
                                   "fields": k["clone_fields"]}), flush=True)
    dev = NVDevice(args.device)
    dev.default_timeout_ms = 5000
    m = dev.gen.compute
    qcls = dev.qmd_class
    lib = dev.compiler.compile(SRC_TRIGGER if k.get("trigger") else
                               SRC_WAIT if k.get("wait") else SRC)
    inc, stp = dev.program(lib, "inc"), dev.program(lib, "step")
    ch = dev.compute_channel
    t0, end, done, sem, prog = (dev.new_signal() for _ in range(5))
    wfi = nvm(SUBC_COMPUTE, m.WAIT_FOR_IDLE, 0)
    inv = nvm(SUBC_COMPUTE, m.INVALIDATE_SHADER_CACHES_NO_WFI, m.cache_invalidate)
    acq_exec = fval(cl.NVCBC0_REPORT_SEMAPHORE_EXECUTE_OPERATION,
                    cl.NVCBC0_REPORT_SEMAPHORE_EXECUTE_OPERATION_ACQUIRE) \
        | fval(cl.NVCBC0_REPORT_SEMAPHORE_EXECUTE_STRUCTURE_SIZE,
               cl.NVCBC0_REPORT_SEMAPHORE_EXECUTE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD)
    assert cl.NVCBC0_SET_REPORT_SEMAPHORE_PAYLOAD_LOWER + 16 == \
        cl.NVCBC0_REPORT_SEMAPHORE_EXECUTE

    extra: list[Any] = []  # buffers the chains' null QMDs live in

    def pcas(qmd_va: int, action: int | None = None) -> list[int]:
        return nvm(SUBC_COMPUTE, m.SEND_PCAS_A, qmd_va >> 8) + nvm(
            SUBC_COMPUTE, m.SEND_SIGNALING_PCAS2_B,
            m.pcas_action(dev.pcas_action if action is None else action))

    def fence(i: int) -> list[int]:
        """The commands before launch i (> 0) of the chain."""
        f = k.get("fence", "")
        if f == "wfi":
            return wfi[:]
        if f == "wfi_inv":
            return wfi + inv
        if f == "sem_host":
            return host_semaphore(sem.va, i, SEM_ACQUIRE_GEQ_64)
        if f == "sem_compute":
            return nvm(SUBC_COMPUTE, cl.NVCBC0_SET_REPORT_SEMAPHORE_PAYLOAD_LOWER, i, 0,
                       sem.va & 0xFFFFFFFF, sem.va >> 32, acq_exec)
        return []

    def build(launches: list[tuple[Any, tuple, tuple, tuple]], *, last: Any = None,
              fields: dict[str, int] | None = None) -> tuple[list[list[int]], Any]:
        """Launch blocks and per-launch command lists for the chain `launches`; the last grid
        releases `last` (default `done`) = 1; `fields` replace the mechanism (single launches)."""
        prg0 = launches[0][0]
        size = round_up(max(p.kernargs_size() for p, *_ in launches), 256)
        buf = dev.alloc_kernargs(size * len(launches) + 256)
        view = buf.cpu_view()
        base = round_up(buf.va, 256) - buf.va
        qmds = []
        for i, (p, a, gs, ls) in enumerate(launches):
            off = base + i * size
            ka = p.fill_kernargs(a, gs, ls, (buf.va + off, view[off:off + size]))
            qmds.append((ka, ka.va + p.qmd_offset(ka.va)))
        n = len(launches)
        cmds = []
        sent_all = fields is not None or sends_every_qmd(k)
        gate = k.get("gate") if fields is None else None
        gring = k.get("gring") if fields is None else None
        if gate or gring:
            gbuf = dev.alloc_kernargs((n + 1) * 512 + 256)
            gview = gbuf.cpu_view()
            gbase = round_up(gbuf.va, 256) - gbuf.va
            extra.append(gbuf)
        if gring and k.get("ring"):
            # the CPU writes the ring's slots and gates as it submits (`ring_replay`): here only
            # each launch's QMD bytes
            out = []
            for i, (ka, qva) in enumerate(qmds):
                q = qcls(bytearray(ka.qmd))
                shape_qmd(k, i, q, None, sem.va)
                if i == n - 1:
                    q.set_release(0, (last or done).va, 1)
                out.append(bytes(q.data))
            return [["ring", out]], buf  # type: ignore[list-item]
        if gring:
            tail_va = gbuf.va + gbase + 512 * n  # the null QMD the last gate starts
            tail = null_qmd(qcls, 0, None, selfcopy=False)
            gview[gbase + 512 * n:gbase + 512 * n + qcls.size_B] = tail.data
        for i, (ka, qva) in enumerate(qmds):
            qb = bytearray(ka.qmd)
            q = qcls(qb)
            if fields is not None:
                q.write(**fields)
            else:
                nxt = cbuf0_of(qcls(bytearray(qmds[i + 1][0].qmd))) if i + 1 < n else None
                shape_qmd(k, i, q, qmds[i + 1][1] if i + 1 < n else None, sem.va, nxt)
            if i == n - 1:
                q.set_release(0, (last or done).va, 1)
            c: list[int] = inv[:] if i == 0 else fence(i)
            if gring:
                g_va = gbuf.va + gbase + 512 * i
                link_gate(q, k, g_va)
                g_off = gbase + 512 * i
                gview[g_off:g_off + qcls.size_B] = gate_of(
                    qcls, k, qmds[i + 1][1] if i + 1 < n else tail_va).data
                if k.get("gload"):
                    c += pcas(g_va, k["gload"])
                if i == 0:
                    c += pcas(qva)
                else:
                    c += pcas(g_va - 512, k["dec"])
                if i == n - 1 and k.get("close"):
                    c += pcas(g_va, k["dec"])
            elif gate:
                # N_i at gbuf + 512 i: decremented by grid i, then schedules grid i + 1
                n_off = gbase + 512 * i
                n_va = gbuf.va + n_off
                nq = null_qmd(qcls, gate, qmds[i + 1][1] if i + 1 < n else None)
                gview[n_off:n_off + qcls.size_B] = nq.data
                q.set("DEPENDENT_QMD_ENABLE", 1, 0)
                q.set("DEPENDENT_QMD_ACTION",
                      q.value("DEPENDENT_QMD_ACTION_QMD_DECREMENT_DEPENDENCE"), 0)
                q.set("DEPENDENT_QMD_PREFETCH", 1, 0)
                q.set("DEPENDENT_QMD0_POINTER", n_va >> 8)
                c += pcas(n_va, CUDA_PCAS)
                c += pcas(qva, CUDA_PCAS)
            elif sent_all or i == 0:
                if i == 0 and k.get("presend") and fields is None:
                    for _, later_va in reversed(qmds[1:]):
                        c += pcas(later_va, CUDA_PCAS)
                c += pcas(qva)
            ka.qmd[:] = qb
            cmds.append(c)
        del prg0
        return cmds, buf

    def bind(cmds: list[list[int]]) -> tuple[Any, list[tuple[int, int]]]:
        """The commands in one GPU buffer: graph form is one segment, stream form one per launch
        with a progress release (no wait for idle) after each."""
        if cmds and cmds[0] and cmds[0][0] == "ring":
            R = k["ring"]
            rb = dev.alloc_kernargs(2 * R * 512 + 256)
            return rb, [("ring", rb, cmds[0][1])]  # type: ignore[list-item]
        segs = []
        for c in cmds:
            if mode == "stream":
                c = c + host_semaphore(prog.va, 1, SEM_RELEASE_64)
            segs.append(array("I", c))
        if mode == "graph":
            segs = [array("I", [w for s in segs for w in s])]
        total = sum(len(s) for s in segs)
        b = dev.alloc(total * 4 + 64, kind=MemKind.VRAM, cpu_access=True)
        v = b.cpu_view().cast("I")
        parts, off = [], 0
        for s in segs:
            v[off:off + len(s)] = s
            parts.append((b.va + off * 4, len(s)))
            off += len(s)
        return b, parts

    def replay(parts: list[tuple[int, int]]) -> tuple[float, float, float, float]:
        """(wall s, CPU submit s, GPU s to the last grid's release, GPU s to idle)."""
        if parts and parts[0][0] == "ring":  # the CPU-driven ring (`bind`)
            return ring_replay(parts[0][1], parts[0][2])  # type: ignore[misc]
        done.value = 0
        sem.value = 0
        end.value = 0
        t = time.perf_counter()
        first = [array("I", host_semaphore(t0.va, 1, SEM_RELEASE_WFI_TS))]
        chunk = 512
        for c in range(0, len(parts), chunk):
            ps: list[Any] = (first if c == 0 else []) + parts[c:c + chunk]
            if c + chunk >= len(parts):
                ps.append(array("I", host_semaphore(end.va, 1, SEM_RELEASE_WFI_TS)))
            ch.submit(ps)
        t_sub = time.perf_counter() - t
        deadline = t + 5
        while done.value < 1 or end.value < 1:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"not complete after 5 s: done={done.value} end={end.value} "
                                   f"sem={sem.value}; {ch.describe()}")
        wall = time.perf_counter() - t
        hz = dev.clock_hz
        return (wall, t_sub, (done.timestamp - t0.timestamp) / hz,
                (end.timestamp - t0.timestamp) / hz)

    def wait_for(sig: Any, value: int, deadline: float, what: str) -> None:
        while sig.value < value:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{what}: signal {sig.value} < {value} after 5 s; "
                                   f"{ch.describe()}")

    def ring_replay(rb: Any, qbs: list[bytes]) -> tuple[float, float, float, float]:
        """Launch after launch through a ring of R QMD slots and R gates the CPU rewrites as it
        submits (the protocol a stream would use), each launch its own submission."""
        R = k["ring"]
        view = rb.cpu_view()
        base = round_up(rb.va, 256) - rb.va

        def slot(j: int) -> tuple[int, int]:  # (offset in rb, address) of QMD slot j
            return base + 512 * j, rb.va + base + 512 * j

        def gate(j: int) -> tuple[int, int]:
            return base + 512 * (R + j), rb.va + base + 512 * (R + j)

        done.value = 0
        sem.value = 0
        end.value = 0
        t = time.perf_counter()
        deadline = t + 5
        ch.submit([array("I", host_semaphore(t0.va, 1, SEM_RELEASE_WFI_TS))])
        n = len(qbs)
        for i, qb in enumerate(qbs):
            # slot i % R was last used by launch i - R and its gate fired once launch i - R + 1
            # started; with `delay`, launch i - 1 must have completed
            wait_for(sem, i if k.get("delay") else i - R + 2, deadline, f"launch {i}")
            so, sva = slot(i % R)
            go, gva = gate(i % R)
            q = qcls(bytearray(qb))
            link_gate(q, k, gva)
            view[go:go + qcls.size_B] = gate_of(qcls, k, slot((i + 1) % R)[1]).data
            view[so:so + qcls.size_B] = q.data
            c = pcas(gva, k["gload"]) if k.get("gload") else []
            c += inv + pcas(sva) if i == 0 else pcas(gate((i - 1) % R)[1], k["dec"])
            ch.submit([array("I", c)])
        wait_for(sem, n - R + 2, deadline, "the closing null QMD's slot")
        so, _ = slot(n % R)
        view[so:so + qcls.size_B] = null_qmd(qcls, 0, None, selfcopy=False).data
        c = pcas(gate((n - 1) % R)[1], k["dec"]) if k.get("close") else []
        t_sub = time.perf_counter() - t
        ch.submit([array("I", c + host_semaphore(end.va, 1, SEM_RELEASE_WFI_TS))])
        wait_for(done, 1, deadline, "the last grid")
        wait_for(end, 1, deadline, "the end's release")
        wall = time.perf_counter() - t
        hz = dev.clock_hz
        return (wall, t_sub, (done.timestamp - t0.timestamp) / hz,
                (end.timestamp - t0.timestamp) / hz)

    out: dict[str, Any] = {"mode": mode, "mech": mech}
    if k.get("gsem"):
        gate_semantics(dev, inc, qcls, pcas, inv, ch)
        os._exit(0)
    # -- timing: N launches of inc (4 x 256) on one buffer
    x = dev.alloc(1024 * 4)
    dev.copyin(x, np.zeros(1024, np.uint32))
    dev.synchronize()  # the probe submits to the channel directly, outside the device timeline
    cmds, kbuf = build([(inc, (x, 1024), (4, 1, 1), (256, 1, 1))] * args.n)
    body, parts = bind(cmds)
    rows = [replay(parts) for _ in range(args.reps)]
    med = [statistics.median(r[j] for r in rows) for j in range(4)]
    out.update(wall_ms=med[0] * 1e3, submit_ms=med[1] * 1e3, gpu_last_ms=med[2] * 1e3,
               gpu_idle_ms=med[3] * 1e3, wall_min_ms=min(r[0] for r in rows) * 1e3,
               gpu_us_per_launch=med[2] * 1e6 / args.n)
    res = np.zeros(1024, np.uint32)
    dev.copyout(res, x)
    out["inc_ok"] = bool((res == args.n * args.reps).all())
    out["inc_min_max"] = [int(res.min()), int(res.max())]
    dev.free(body)
    dev.free(kbuf)
    # -- correctness: a chain alternating A -> B -> A at a size that fills the GPU
    n = args.chain_elements
    a, b = dev.alloc(4 * n), dev.alloc(4 * n)
    dev.copyin(a, np.zeros(n, np.uint32))
    dev.copyin(b, np.full(n, 0xDEAD, np.uint32))
    dev.synchronize()
    gs = ((n + 255) // 256, 1, 1)
    chain = [(stp, (a, b, n) if i % 2 == 0 else (b, a, n), gs, (256, 1, 1))
             for i in range(args.chain)]
    cmds, kbuf = build(chain)
    body, parts = bind(cmds)
    crow = [replay(parts) for _ in range(args.chain_replays)]
    res = np.zeros(n, np.uint32)
    dev.copyout(res, a)
    want = args.chain * args.chain_replays
    bad = int((res != want).sum())
    out.update(chain_launches=want, chain_elements=n, chain_bad=bad, chain_ok=bad == 0,
               chain_wall_ms=statistics.median(r[0] for r in crow) * 1e3,
               chain_gpu_ms=statistics.median(r[3] for r in crow) * 1e3)
    dev.free(body)
    dev.free(kbuf)
    # -- the same chain on host memory, read by the CPU as soon as the completion is seen: are
    # the writes of every grid visible to the host then (the membar question)?
    nh = args.chain_elements // 8
    ha, hb = (dev.alloc(4 * nh, kind=MemKind.HOST, cpu_access=True) for _ in range(2))
    va, vb = (np.frombuffer(h.cpu_view(), np.uint32) for h in (ha, hb))
    va[:] = 0
    vb[:] = 0xDEAD
    gh = ((nh + 255) // 256, 1, 1)
    cmds, kbuf = build([(stp, (ha, hb, nh) if i % 2 == 0 else (hb, ha, nh), gh, (256, 1, 1))
                        for i in range(args.chain)])
    body, parts = bind(cmds)
    hbad = 0
    for r in range(args.chain_replays):
        replay(parts)
        hbad += int((va != args.chain * (r + 1)).sum())
    out.update(host_chain_bad=hbad, host_chain_elements=nh)
    print("JSON" + json.dumps(out), flush=True)
    if k.get("latch") and not latch_semantics(dev, build, bind, inc, x, ch):
        os._exit(0)  # a latch wait never ended: the channel is blocked, the driver frees it
    dev.close()


def latch_semantics(dev: Any, build: Any, bind: Any, inc: Any, x: Any, ch: Any) -> bool:
    """What a latch wait does when the arrival happened before the waiter was sent ("late"), when
    another latch arrived in between ("stale"), and when nothing ever arrives ("orphan"): each a
    single launch that must complete within a second. Prints a JSON line after each (a wait that
    never ends blocks the channel, so the first such one ends the list). True if all completed."""
    def one(fields: dict[str, int]) -> bool:
        sig = dev.new_signal()
        cmds, kbuf = build([(inc, (x, 1024), (4, 1, 1), (256, 1, 1))], last=sig, fields=fields)
        _, parts = bind(cmds)
        ch.submit(parts)
        t = time.perf_counter()
        while sig.value < 1:
            if time.perf_counter() - t > 1.0:
                return False
        return True

    cases = [("late_arrive", {"ARRIVE_AT_LATCH_VALID": 1, "ARRIVE_AT_LATCH_ID": 0x5A5A}),
             ("late_wait", {"WAIT_ON_LATCH_VALID": 1, "WAIT_ON_LATCH_ID": 0x5A5A}),
             ("stale_arrive", {"ARRIVE_AT_LATCH_VALID": 1, "ARRIVE_AT_LATCH_ID": 0x6B6B}),
             ("stale_other", {"ARRIVE_AT_LATCH_VALID": 1, "ARRIVE_AT_LATCH_ID": 0x7C7C}),
             ("stale_wait", {"WAIT_ON_LATCH_VALID": 1, "WAIT_ON_LATCH_ID": 0x6B6B}),
             ("orphan_wait", {"WAIT_ON_LATCH_VALID": 1, "WAIT_ON_LATCH_ID": 0x1357})]
    res: dict[str, bool] = {}
    for name, fields in cases:
        res[name] = one(fields)
        print("JSON" + json.dumps({"semantics": res}), flush=True)
        if not res[name]:
            return False
    return True


def gate_semantics(dev: Any, inc: Any, qcls: Any, pcas: Any, inv: list[int], ch: Any) -> None:
    """What a gate does when left pending, and how a pushbuffer send counts on it: prints a JSON
    line after each step (a step that does not complete within a second ends the list, the
    channel may be blocked)."""
    import numpy as np

    from runtime.drivers.nv.gpfifo import SEM_RELEASE_WFI_TS, host_semaphore
    x = dev.alloc(4096)
    dev.copyin(x, np.zeros(1024, np.uint32))
    dev.synchronize()
    buf = dev.alloc_kernargs(8 * 512 + 256)
    view = buf.cpu_view()
    base = round_up_(buf.va, 256) - buf.va
    kbuf = dev.alloc_kernargs(4 * 4096)
    kview = kbuf.cpu_view()
    res: dict[str, Any] = {}
    print("JSON" + json.dumps({"mode": "stream", "mech": "gate_sem"}), flush=True)

    def addr(j: int) -> tuple[int, int]:
        return base + 512 * j, buf.va + base + 512 * j

    def kernel(j: int, sig: Any) -> Any:
        """inc's QMD at slot j, releasing `sig` = 1 when it completes."""
        ka = inc.fill_kernargs((x, 1024), (4, 1, 1), (256, 1, 1),
                               (kbuf.va + 4096 * j, kview[4096 * j:4096 * (j + 1)]))
        q = qcls(bytearray(ka.qmd))
        q.set_release(0, sig.va, 1)
        return q

    def put(j: int, q: Any) -> None:
        o, _ = addr(j)
        view[o:o + qcls.size_B] = q.data

    def counters(j: int) -> dict[str, int]:
        o, _ = addr(j)
        q = qcls(bytearray(view[o:o + qcls.size_B]))
        return {"DEPENDENCE_COUNTER": q.get("DEPENDENCE_COUNTER"),
                "HW_ONLY_DEPENDENCE_COUNTER": q.get("HW_ONLY_DEPENDENCE_COUNTER")}

    def step(name: str, words: list[int]) -> bool:
        sig = dev.new_signal()
        ch.submit([array("I", words + host_semaphore(sig.va, 1, SEM_RELEASE_WFI_TS))])
        t = time.perf_counter()
        while sig.value < 1:
            if time.perf_counter() - t > 1.0:
                res[name] = False
                print("JSON" + json.dumps({"gate_semantics": res}), flush=True)
                return False
        res[name] = True
        return True

    # 1. a kernel whose gate (loaded: PCAS action 10) waits for a second decrement that has not
    # come: does the channel's wait for idle (a WFI release) complete? Then the decrement that
    # releases it (it starts a null QMD)
    s1 = dev.new_signal()
    k1 = kernel(0, s1)
    link_gate(k1, {}, addr(1)[1])
    put(0, k1)
    put(1, null_qmd(qcls, 2, addr(2)[1], GATE_ACTIONS["icopy"], False))
    put(2, null_qmd(qcls, 0, None, selfcopy=False))
    if not step("pending_gate_wfi", pcas(addr(1)[1], 10) + inv + pcas(addr(0)[1])):
        return
    res["pending_kernel_done"] = s1.value
    res["pending_gate_fields"] = counters(1)
    if not step("pending_gate_released", pcas(addr(1)[1], 7)):
        return
    res["released_gate_fields"] = counters(1)
    print("JSON" + json.dumps({"gate_semantics": res}), flush=True)
    # 2. a gate of two decrements (SELF_COPY_ON_COMPLETION, as CUDA's) loaded with action 10, then
    # decremented from the pushbuffer: does the load count as one (CUDA's gates), when does its
    # successor start, what does the engine write back
    s2 = dev.new_signal()
    put(3, kernel(1, s2))
    put(4, null_qmd(qcls, 2, addr(3)[1], GATE_ACTIONS["icopy"], True))
    if not step("load_sent", pcas(addr(4)[1], 10)):
        return
    time.sleep(0.05)
    res["load_successor_ran"] = s2.value
    res["load_gate_fields"] = counters(4)
    if not step("load_dec1", pcas(addr(4)[1], 7)):
        return
    time.sleep(0.05)
    res["load_dec1_successor_ran"] = s2.value
    res["load_dec1_gate_fields"] = counters(4)
    print("JSON" + json.dumps({"gate_semantics": res}), flush=True)
    if s2.value < 1:
        if not step("load_dec2", pcas(addr(4)[1], 7)):
            return
        time.sleep(0.05)
        res["load_dec2_successor_ran"] = s2.value
        res["load_dec2_gate_fields"] = counters(4)
        print("JSON" + json.dumps({"gate_semantics": res}), flush=True)
    # 3. a loaded gate loaded again while one decrement is still due: is the count reset (the
    # next decrement does not start it), kept (it does), or refused
    s3 = dev.new_signal()
    put(5, kernel(2, s3))
    put(6, null_qmd(qcls, 2, addr(5)[1], GATE_ACTIONS["icopy"], False))
    if not step("reload_dec1", pcas(addr(6)[1], 10) + pcas(addr(6)[1], 7)):
        return
    if not step("reload_again", pcas(addr(6)[1], 10) + pcas(addr(6)[1], 7)):
        return
    time.sleep(0.05)
    res["reload_dec2_successor_ran"] = s3.value
    res["x0"] = int(dev_read(dev, x))
    print("JSON" + json.dumps({"gate_semantics": res}), flush=True)


def round_up_(v: int, a: int) -> int:
    return (v + a - 1) // a * a


def dev_read(dev: Any, x: Any) -> int:
    import numpy as np
    out = np.zeros(1024, np.uint32)
    dev.copyout(out, x)
    return int(out[0])


def run_baseline(args: argparse.Namespace) -> None:
    """Today's runtime paths: launch + wait, 1000 back-to-back launches, a graph of N launches."""
    import numpy as np

    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import Launch
    dev = NVDevice(args.device)
    prg = dev.program(dev.compiler.compile(SRC), "inc")
    x = dev.alloc(4096)
    dev.copyin(x, np.zeros(1024, np.uint32))
    gs, ls = (4, 1, 1), (256, 1, 1)
    for _ in range(200):
        prg(x, 1024, global_size=gs, local_size=ls)
    dev.synchronize()
    tl = dev.timeline_signal
    lat = []
    for _ in range(2000):
        t = time.perf_counter()
        prg(x, 1024, global_size=gs, local_size=ls)
        tl.wait(dev.timeline_value)
        lat.append(time.perf_counter() - t)
    b2b, cpu = [], []
    for _ in range(9):
        t = time.perf_counter()
        for _ in range(1000):
            prg(x, 1024, global_size=gs, local_size=ls)
        cpu.append(time.perf_counter() - t)
        dev.synchronize()
        b2b.append(time.perf_counter() - t)
    g = dev.graph([Launch(prg, (x, 1024), gs, ls) for _ in range(args.n)])
    g.replay(wait=True)
    walls, cpus = [], []
    for _ in range(15):
        dev.synchronize()
        t = time.perf_counter()
        g.replay()
        cpus.append(time.perf_counter() - t)
        dev.synchronize()
        walls.append(time.perf_counter() - t)
    out = {"mode": "baseline", "launch_wait_med_us": statistics.median(lat) * 1e6,
           "launch_wait_min_us": min(lat) * 1e6, "b2b_ms": statistics.median(b2b) * 1e3,
           "b2b_cpu_ms": statistics.median(cpu) * 1e3,
           "graph_wall_ms": statistics.median(walls) * 1e3,
           "graph_cpu_us_per_launch": statistics.median(cpus) / args.n * 1e6}
    dev.close()
    print("JSON" + json.dumps(out), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="launches per timed chain")
    ap.add_argument("--reps", type=int, default=15, help="timed replays")
    ap.add_argument("--chain", type=int, default=1000, help="launches per correctness chain")
    ap.add_argument("--chain-replays", type=int, default=3)
    ap.add_argument("--chain-elements", type=int, default=CHAIN_N)
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--json", default="")
    ap.add_argument("--only", default="", help="mechanisms (comma separated) to run, "
                    "or FORM:MECHANISM for one outside that form's list (stream:qmd_lean)")
    ap.add_argument("--child-timeout", type=int, default=60)
    ap.add_argument("--cuda-fields", default="", help="CUDA's QMD fields per kind of launch "
                    "(scripts/sniff_cuda_launches.py --cuda-fields), for the cuda_* mechanisms")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "baseline":
        run_baseline(args)
        return 0
    if args.child:
        mode, mech = args.child.split(":")
        run_child(mode, mech, args)
        return 0
    only = set(filter(None, args.only.split(",")))
    jobs = ["baseline"] + [f"graph:{m}" for m in GRAPH if not only or m in only] + \
        [f"stream:{m}" for m in STREAM if not only or m in only] + \
        [j for j in dict.fromkeys(filter(None, args.only.split(",")))
         if ":" in j and j.split(":")[1] in MECHS]
    rows = []
    fwd = ["--n", str(args.n), "--reps", str(args.reps), "--chain", str(args.chain),
           "--chain-replays", str(args.chain_replays),
           "--chain-elements", str(args.chain_elements), "--device", args.device,
           "--child-timeout", str(args.child_timeout), "--cuda-fields", args.cuda_fields]
    for job in jobs:
        t = time.perf_counter()
        try:
            r = subprocess.run([sys.executable, __file__, "--child", job, *fwd],
                               capture_output=True, text=True, timeout=args.child_timeout,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
            lines = [json.loads(ln[4:]) for ln in r.stdout.splitlines() if ln.startswith("JSON")]
            row = {}
            for line in lines:
                row.update(line)
            if "mode" not in row:  # the child printed no result
                row.update(job=job, error=(r.stderr or r.stdout)[-1500:], rc=r.returncode)
        except subprocess.TimeoutExpired as e:
            row = {"job": job, "error": f"timed out after {args.child_timeout} s",
                   "stdout": str(e.stdout)[-800:], "stderr": str(e.stderr)[-800:]}
        row.setdefault("job", job)
        row["seconds"] = round(time.perf_counter() - t, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{'mechanism':24} {'wall ms':>8} {'gpu ms':>8} {'to idle':>8} {'submit':>8}  "
          f"{'inc':>4}  chain ({args.chain * args.chain_replays} launches, "
          f"{args.chain_elements} elements)")
    for res in rows:
        if "error" in res:
            print(f"{res['job']:24} FAILED: {res['error'].strip().splitlines()[-1][:100]}")
        elif res.get("mode") == "baseline":
            print(f"{'baseline':24} launch+wait {res['launch_wait_med_us']:.2f} us, 1000 b2b "
                  f"{res['b2b_ms']:.3f} ms (CPU {res['b2b_cpu_ms']:.3f}), graph "
                  f"{res['graph_wall_ms']:.3f} ms ({res['graph_cpu_us_per_launch']:.3f} us CPU/launch)")
        elif "wall_ms" not in res:
            print(f"{res['job']:24} {json.dumps(res.get('gate_semantics', res))[:400]}")
        else:
            sem = f"; latch {res['semantics']}" if "semantics" in res else ""
            print(f"{res['job']:24} {res['wall_ms']:8.3f} {res['gpu_last_ms']:8.3f} "
                  f"{res['gpu_idle_ms']:8.3f} {res['submit_ms']:8.3f}  "
                  f"{'ok' if res['inc_ok'] else 'BAD':>4}"
                  f"  {'ok' if res['chain_ok'] else 'BAD'} ({res['chain_bad']} wrong, "
                  f"{res['chain_gpu_ms']:.2f} ms GPU); host memory chain "
                  f"{'ok' if res['host_chain_bad'] == 0 else 'BAD'} ({res['host_chain_bad']} wrong)"
                  f"{sem}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
