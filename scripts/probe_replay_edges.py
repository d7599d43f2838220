#!/usr/bin/env python3
"""What a graph replay costs the GPU before its first grid and after its last, on a real NVIDIA
GPU: the replay's submission (wait for the timeline's previous value, call the graph's body,
release the next value) measured against variants of its head and its tail, alternated in rounds
on one graph, with the CPU polling throughout.

Head variants: the host acquire of the previous value (what a replay submits), no dependency at
all (only valid here because every replay follows a synchronize), and the compute class's
WAIT_FOR_IDLE instead of the acquire. Tail variants: the host release with wait for idle and
timestamp plus the non-stall interrupt (what a replay submits), the same without the interrupt,
without the timestamp, and the last grid's own QMD release of the value (no host release; its
payload rewritten before each replay, which is only safe because each follows a synchronize).
Also: the GPU's timestamps of the replay's start and end beside the CPU's clock (CLOCK_REALTIME),
which splits the wall into head, GPU time and tail where the GPU's timer follows the host's.

    python scripts/probe_replay_edges.py [--json out.json] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SRC = r"""
extern "C" __global__ void inc_wait(unsigned *x, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--sizes", default="1000,1", help="graph sizes, comma-separated")
    ap.add_argument("--mock", action="store_true", help="on mock-nv (a check of the script)")
    a = ap.parse_args()

    import numpy as np
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.gpfifo import (SEM_RELEASE_64, SEM_RELEASE_WFI_TS, host_semaphore)
    from runtime.drivers.nv.methods import fval, nvm
    from runtime.drivers.nv.program import NVKernArgs
    from runtime.hcq import Launch
    from runtime.hcq.queue import Var

    if a.mock:
        from runtime.drivers.mock.nv_rm import NvMockOS
        dev = NVDevice(a.device, os=NvMockOS.with_nv_gpus(1))
    else:
        dev = NVDevice(a.device)
    dev.wait_spin_s = 0.05  # poll throughout, as CUDA's spin synchronization does
    prg = dev.program(dev.compiler.compile(SRC), "inc_wait")
    x = dev.alloc(4096)
    dev.copyin(x, np.zeros(1024, np.uint32))
    tl = dev.timeline_signal
    release_wfi = SEM_RELEASE_64 | fval(cl.NVC56F_SEM_EXECUTE_RELEASE_WFI,
                                        cl.NVC56F_SEM_EXECUTE_RELEASE_WFI_EN)
    out: dict[str, Any] = {}
    expect = 0

    for size in (int(v) for v in a.sizes.split(",")):
        g = dev.graph([Launch(prg, (x, 1024), (4, 1, 1), (256, 1, 1), early_start=True)
                       for _ in range(size)])
        g.replay(wait=True)
        expect += size
        body = g.body
        # a graph of launches alone is one compute body, and on an NVDevice its launch blocks
        # are NVKernArgs (Graph types them device-neutrally: HWQueue | None, KernArgs)
        assert body is not None
        last_ka = g.kernargs[-1]
        assert isinstance(last_ka, NVKernArgs)
        plain_qmd = bytes(last_ka.qmd)

        def variant(head: str, tail: str) -> Callable[[], int]:
            var = Var("probe timeline value")
            q = dev.compute_queue().update({var: 1})
            if head == "acquire":
                q.wait(tl, var - 1)
            elif head == "fence":
                q.launch_fence()
            q.call(body)
            if tail != "qmd":
                n = len(q.words)
                ex = {"release": SEM_RELEASE_WFI_TS, "no_intr": SEM_RELEASE_WFI_TS,
                      "no_ts": release_wfi}[tail]
                q.words.extend(host_semaphore(q._sig_va(tl), 0, ex))
                q._patch(var, 0, n + 3, n + 4)
                if tail != "no_intr":
                    q.words.extend(nvm(0, cl.NVC56F_NON_STALL_INTERRUPT, 0))
            resubmit = q.resubmitter(var)

            def run() -> int:
                if tail != "qmd":
                    with dev.submit_lock:
                        return dev.resubmit_timeline(resubmit)
                prg.write_release(last_ka.qmd, tl.va, dev.timeline_value + 1)
                with dev.submit_lock:
                    v = dev.resubmit_timeline(resubmit)
                tl.wait(v)
                last_ka.qmd[:] = plain_qmd  # the other variants' last grid releases nothing
                return v
            return run

        variants = {f"{h}+{t}": variant(h, t) for h, t in (
            ("acquire", "release"), ("none", "release"), ("fence", "release"),
            ("acquire", "no_intr"), ("acquire", "no_ts"), ("acquire", "qmd"))}
        variants["replay()"] = lambda: g.replay() or dev.timeline_value  # the runtime's own
        walls: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(a.rounds):
            for name, run in variants.items():
                ts = []
                for _ in range(21):
                    dev.synchronize()
                    t = time.perf_counter()
                    v = run()
                    tl.wait(v)
                    ts.append(time.perf_counter() - t)
                expect += 21 * size
                walls[name].append(statistics.median(ts))
        # where the GPU's timer stands against the host's clock: replays with timestamps
        rows = []
        for _ in range(41):
            dev.synchronize()
            c0 = time.time_ns()
            g.replay(wait=True)
            c1 = time.time_ns()
            rows.append((g._t0.timestamp - c0, g._t1.timestamp - g._t0.timestamp,
                         c1 - tl.timestamp, c1 - c0))
        expect += 41 * size
        out[f"graph of {size}"] = {
            "wall_us": {k: [round(w * 1e6, 2) for w in v] for k, v in walls.items()},
            "wall_median_us": {k: round(statistics.median(v) * 1e6, 2) for k, v in walls.items()},
            "clock_split_us (head: GPU t0 - CPU start, GPU t1 - t0, tail: CPU seen - GPU release"
            " stamp, wall)": [round(statistics.median(r[i] for r in rows) / 1e3, 2)
                              for i in range(4)],
            "clock_split_min_us": [round(min(r[i] for r in rows) / 1e3, 2) for i in range(4)],
        }
        g.free()
    res = np.zeros(1024, np.uint32)
    dev.copyout(res, x)
    out["ok"] = bool((res == expect).all())
    dev.close()
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
