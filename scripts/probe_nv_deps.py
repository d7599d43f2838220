"""How to start a grid after the previous one on a real NVIDIA GPU: each candidate mechanism timed and
checked for correctness, through the runtime's own building blocks (QMD builder, methods, channel).

Mechanisms (what sits between launch i and launch i+1 of a chain):
- wfi: the compute class's WAIT_FOR_IDLE before SEND_PCAS (what graph bodies used first);
- wfi_inv: WAIT_FOR_IDLE plus INVALIDATE_SHADER_CACHES_NO_WFI (the per-launch stream commands);
- none: SEND_PCAS only; grids may overlap (a lower bound, not a correct chain);
- qmd_schedule: QMD i names QMD i+1 as its dependent with action SCHEDULE: the compute engine
  starts i+1 when i completes; only the first QMD is sent with SEND_PCAS; qmd_schedule_gpu: the
  same with CWD_MEMBAR_TYPE L1_MEMBAR (GPU scope) on every QMD but the last, and
  qmd_schedule_nomembar with L1_NONE (a lower bound, not a correct chain);
- qmd_counter: every QMD is sent, QMD i+1 carries DEPENDENCE_COUNTER 1 and QMD i decrements it
  when it completes (DEPENDENT_QMD action DECREMENT_DEPENDENCE): fan-in by counter;
- sem_host: QMD i releases semaphore S = i+1 (its release slot 1), launch i+1 waits for it with the
  host class's SEM_EXECUTE ACQ_CIRC_GEQ;
- sem_compute: the same release, waited for with the compute class's REPORT_SEMAPHORE_EXECUTE
  OPERATION_ACQUIRE.
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

GRAPH = ["wfi", "wfi_inv", "none", "sem_host", "sem_compute", "qmd_counter", "qmd_schedule",
         "qmd_schedule_gpu", "qmd_schedule_nomembar"]
STREAM = ["wfi_inv", "wfi", "none", "sem_host", "sem_compute"]
CHAIN_N = 1 << 21          # elements per chain buffer: 8192 blocks of 256, several waves on an H200


def run_child(mode: str, mech: str, args: argparse.Namespace) -> None:
    """One mechanism in one form: prints a JSON line."""
    import faulthandler
    faulthandler.dump_traceback_later(args.child_timeout - 5, exit=True)
    import numpy as np
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.gpfifo import (SEM_ACQUIRE_GEQ_64, SEM_RELEASE_64,
                                           SEM_RELEASE_WFI_TS, host_semaphore)
    from runtime.drivers.nv.methods import SUBC_COMPUTE, fval, nvm
    from runtime.hcq.memory import round_up

    dev = NVDevice(args.device)
    dev.default_timeout_ms = 5000
    m = dev.gen.compute
    qcls = dev.qmd_class
    lib = dev.compiler.compile(SRC)
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

    def pcas(qmd_va: int) -> list[int]:
        return nvm(SUBC_COMPUTE, m.SEND_PCAS_A, qmd_va >> 8) + nvm(
            SUBC_COMPUTE, m.SEND_SIGNALING_PCAS2_B, m.pcas_action(dev.pcas_action))

    def fence(i: int) -> list[int]:
        """The commands before launch i (> 0) of the chain."""
        if mech == "wfi":
            return wfi[:]
        if mech == "wfi_inv":
            return wfi + inv
        if mech == "sem_host":
            return host_semaphore(sem.va, i, SEM_ACQUIRE_GEQ_64)
        if mech == "sem_compute":
            return nvm(SUBC_COMPUTE, cl.NVCBC0_SET_REPORT_SEMAPHORE_PAYLOAD_LOWER, i, 0,
                       sem.va & 0xFFFFFFFF, sem.va >> 32, acq_exec)
        return []

    def build(launches: list[tuple[Any, tuple, tuple, tuple]]) -> tuple[list[list[int]], Any]:
        """Launch blocks and per-launch command lists for the chain `launches`."""
        prg0 = launches[0][0]
        size = round_up(max(p._kernargs_size() for p, *_ in launches), 256)
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
        for i, (ka, qva) in enumerate(qmds):
            qb = bytearray(ka.qmd)
            q = qcls(qb)
            if mech in ("sem_host", "sem_compute"):
                q.set_release(1, sem.va, i + 1)
            if mech.startswith("qmd_schedule") and i + 1 < n:
                if mech == "qmd_schedule_gpu":  # GPU-scope membar where a grid feeds a grid
                    q.set("CWD_MEMBAR_TYPE", q.value("CWD_MEMBAR_TYPE_L1_MEMBAR"))
                elif mech == "qmd_schedule_nomembar":
                    q.set("CWD_MEMBAR_TYPE", q.value("CWD_MEMBAR_TYPE_L1_NONE"))
                q.set("DEPENDENT_QMD_ENABLE", 1, 0)
                q.set("DEPENDENT_QMD_ACTION", q.value("DEPENDENT_QMD_ACTION_QMD_SCHEDULE"), 0)
                q.set("DEPENDENT_QMD_PREFETCH", 1, 0)
                q.set("DEPENDENT_QMD0_POINTER", qmds[i + 1][1] >> 8)
            if mech == "qmd_counter":
                if i:
                    q.set("DEPENDENCE_COUNTER", 1)
                if i + 1 < n:
                    q.set("DEPENDENT_QMD_ENABLE", 1, 0)
                    q.set("DEPENDENT_QMD_ACTION",
                          q.value("DEPENDENT_QMD_ACTION_QMD_DECREMENT_DEPENDENCE"), 0)
                    q.set("DEPENDENT_QMD0_POINTER", qmds[i + 1][1] >> 8)
            if i == n - 1:
                q.set_release(0, done.va, 1)
            ka.qmd[:] = qb
            # the first launch invalidates the shader caches (as a graph body starts)
            c: list[int] = inv[:] if i == 0 else fence(i)
            if not mech.startswith("qmd_schedule") or i == 0:
                c += pcas(qva)
            cmds.append(c)
        return cmds, buf

    def bind(cmds: list[list[int]]) -> tuple[Any, list[tuple[int, int]]]:
        """The commands in one GPU buffer: graph form is one segment, stream form one per launch
        with a progress release (no wait for idle) after each."""
        segs = []
        for c in cmds:
            if mode == "stream":
                c = c + host_semaphore(prog.va, 1, SEM_RELEASE_64)
            segs.append(array("I", c))
        if mode == "graph":
            segs = [array("I", [w for s in segs for w in s])]
        total = sum(len(s) for s in segs)
        from runtime.hcq.memory import MemKind
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
        done.value = 0
        sem.value = 0
        end.value = 0
        t = time.perf_counter()
        first = [array("I", host_semaphore(t0.va, 1, SEM_RELEASE_WFI_TS))]
        chunk = 512
        for k in range(0, len(parts), chunk):
            ps: list[Any] = (first if k == 0 else []) + parts[k:k + chunk]
            if k + chunk >= len(parts):
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
        return wall, t_sub, (done.timestamp - t0.timestamp) / hz, (end.timestamp - t0.timestamp) / hz

    out: dict[str, Any] = {"mode": mode, "mech": mech}
    # -- timing: N launches of inc (4 x 256) on one buffer
    x = dev.alloc(1024 * 4)
    dev.copyin(x, np.zeros(1024, np.uint32))
    dev.synchronize()  # the probe submits to the channel directly, outside the device timeline
    cmds, kbuf = build([(inc, (x, 1024), (4, 1, 1), (256, 1, 1))] * args.n)
    body, parts = bind(cmds)
    rows = [replay(parts) for _ in range(args.reps)]
    med = [statistics.median(r[k] for r in rows) for k in range(4)]
    out.update(wall_ms=med[0] * 1e3, submit_ms=med[1] * 1e3, gpu_last_ms=med[2] * 1e3,
               gpu_idle_ms=med[3] * 1e3, wall_min_ms=min(r[0] for r in rows) * 1e3)
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
    from runtime.hcq.memory import MemKind
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
    dev.close()
    print("JSON" + json.dumps(out), flush=True)


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
    ap.add_argument("--only", default="", help="mechanisms (comma separated) to run")
    ap.add_argument("--child-timeout", type=int, default=60)
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
        [f"stream:{m}" for m in STREAM if not only or m in only]
    rows = []
    fwd = ["--n", str(args.n), "--reps", str(args.reps), "--chain", str(args.chain),
           "--chain-replays", str(args.chain_replays),
           "--chain-elements", str(args.chain_elements), "--device", args.device,
           "--child-timeout", str(args.child_timeout)]
    for job in jobs:
        t = time.perf_counter()
        try:
            r = subprocess.run([sys.executable, __file__, "--child", job, *fwd],
                               capture_output=True, text=True, timeout=args.child_timeout,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
            line = next((ln for ln in r.stdout.splitlines() if ln.startswith("JSON")), None)
            row = json.loads(line[4:]) if line else {
                "job": job, "error": (r.stderr or r.stdout)[-1500:], "rc": r.returncode}
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
    for r in rows:
        if "error" in r:
            print(f"{r['job']:24} FAILED: {r['error'].strip().splitlines()[-1][:100]}")
        elif r.get("mode") == "baseline":
            print(f"{'baseline':24} launch+wait {r['launch_wait_med_us']:.2f} us, 1000 b2b "
                  f"{r['b2b_ms']:.3f} ms (CPU {r['b2b_cpu_ms']:.3f}), graph {r['graph_wall_ms']:.3f}"
                  f" ms ({r['graph_cpu_us_per_launch']:.3f} us CPU/launch)")
        else:
            print(f"{r['job']:24} {r['wall_ms']:8.3f} {r['gpu_last_ms']:8.3f} "
                  f"{r['gpu_idle_ms']:8.3f} {r['submit_ms']:8.3f}  {'ok' if r['inc_ok'] else 'BAD':>4}"
                  f"  {'ok' if r['chain_ok'] else 'BAD'} ({r['chain_bad']} wrong, "
                  f"{r['chain_gpu_ms']:.2f} ms GPU); host memory chain "
                  f"{'ok' if r['host_chain_bad'] == 0 else 'BAD'} ({r['host_chain_bad']} wrong)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
