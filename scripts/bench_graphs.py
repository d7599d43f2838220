#!/usr/bin/env python3
"""Launches and graphs on a real NVIDIA GPU beside CUDA: runtime.hcq, CUDA C++ (nvcc) and PyTorch's
CUDA graphs in one run, with the same tiny kernel (4 x 256 threads, x[i] += 1).

Figures: launch + wait (median), 1000 launches with one wait, a graph of 1000 chained launches
(replay wall, submission to completion seen by the CPU), the same chain with `early_start` (each
kernel begins with griddepcontrol.wait; CUDA's column: its graph captured from programmatic
dependent launches), the same with kernels that first call griddepcontrol.launch_dependents (both
also at 53 CTAs of 96 threads, a shape where CUDA's trigger was seen to gain), a graph of 1000
independent launches (each on its own slice, no edges), and the CPU cost of a replay
per launch (also with each replay's submissions built afresh, as replays did before they were
built once; the GPU time of the chains from the replays' timestamps; and the chains' wall with
the CPU polling until they complete, as the CUDA program's spin synchronization does, where this
runtime's waits poll for 50 us and then sleep until the GPU's interrupt). CUDA C++ comes from
scripts/cuda_graph_bench.cu built with nvcc, PyTorch's from torch.cuda.graph capturing
`x.add_(1)`; each runs in a process of its own (libcuda and this runtime never share one).

    python scripts/bench_graphs.py [--json out.json] [--skip-cuda] [--skip-torch]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
N = 1000

SRC = r"""
extern "C" __global__ void inc(unsigned *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
extern "C" __global__ void inc_wait(unsigned *x, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
extern "C" __global__ void inc_trigger(unsigned *x, int n) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
"""

TORCH = r"""
import json, statistics, time, torch
N = 1000
x = torch.zeros(1024, dtype=torch.int32, device="cuda")
for _ in range(200):
    x.add_(1)
torch.cuda.synchronize()
lat = []
for _ in range(2000):
    t = time.perf_counter(); x.add_(1); torch.cuda.synchronize(); lat.append(time.perf_counter() - t)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        x.add_(1)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(N):
        x.add_(1)
g.replay(); torch.cuda.synchronize()
walls = []
for _ in range(21):
    t = time.perf_counter(); g.replay(); torch.cuda.synchronize(); walls.append(time.perf_counter() - t)
print("JSON" + json.dumps({"launch_sync_median": statistics.median(lat),
                           "graph_chain": statistics.median(walls), "version": torch.__version__}))
"""


def _json_line(out: str) -> dict[str, Any] | None:
    line = next((ln for ln in out.splitlines() if ln.startswith("JSON")), None)
    return json.loads(line[4:]) if line else None


def cuda_cpp() -> dict[str, Any]:
    """CUDA C++'s figures (scripts/cuda_graph_bench.cu through nvcc)."""
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",)
                                         if os.path.exists(p)), None)
    if nvcc is None:
        return {"error": "nvcc not found"}
    with tempfile.TemporaryDirectory() as d:
        exe = Path(d) / "cuda_graph_bench"
        b = subprocess.run([nvcc, "-O2", "-arch=sm_90", "-o", str(exe),
                            str(ROOT / "scripts" / "cuda_graph_bench.cu")],
                           capture_output=True, text=True, timeout=180)
        if b.returncode:
            return {"error": "nvcc failed: " + (b.stderr or b.stdout)[-1500:]}
        r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
        return _json_line(r.stdout) or {"error": (r.stderr or r.stdout)[-1500:]}


def torch_graph() -> dict[str, Any]:
    """PyTorch's launch + synchronize and CUDA graph of the same chain."""
    r = subprocess.run([sys.executable, "-c", TORCH], capture_output=True, text=True,
                       timeout=180)
    return _json_line(r.stdout) or {"error": (r.stderr or r.stdout)[-1500:]}


def ours(device: str) -> dict[str, Any]:
    """runtime.hcq's figures."""
    import numpy as np

    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import Launch

    dev = NVDevice(device)
    lib = dev.compiler.compile(SRC)
    prg, prg_wait, prg_trigger = (dev.program(lib, k) for k in ("inc", "inc_wait", "inc_trigger"))
    gs, ls = (4, 1, 1), (256, 1, 1)
    x = dev.alloc(4096)
    slices = dev.alloc(N * 4096)
    dev.copyin(x, np.zeros(1024, np.uint32))
    dev.copyin(slices, np.zeros(N * 1024, np.uint32))
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
    b2b, b2b_cpu = [], []
    for _ in range(9):
        t = time.perf_counter()
        for _ in range(N):
            prg(x, 1024, global_size=gs, local_size=ls)
        b2b_cpu.append(time.perf_counter() - t)
        dev.synchronize()
        b2b.append(time.perf_counter() - t)

    def graph_figures(g: Any, spin: bool = False, sync: bool = True) -> tuple[float, float]:
        """(replay wall, replay CPU up to its return, which follows the doorbell), medians of 21;
        the graph is replayed 22 times. A wait polls for `Device.wait_spin_s` (50 us), then
        sleeps until the GPU's interrupt; with `spin` it polls throughout, as the CUDA program
        (cudaDeviceScheduleSpin) does; without `sync`, the end is the timeline's wait alone
        (`Device.synchronize` also asks the driver for faults and covers the streams)."""
        spin_s = dev.wait_spin_s
        if spin:
            dev.wait_spin_s = 0.05
        try:
            g.replay(wait=True)
            walls, cpus = [], []
            for _ in range(21):
                dev.synchronize()
                t = time.perf_counter()
                g.replay()
                cpus.append(time.perf_counter() - t)
                if sync:
                    dev.synchronize()
                else:
                    dev.timeline_signal.wait(dev.timeline_value)
                walls.append(time.perf_counter() - t)
        finally:
            dev.wait_spin_s = spin_s
        return statistics.median(walls), statistics.median(cpus)

    def gpu_time(g: Any) -> float:
        """The GPU's time for the graph (its timestamps), median of 7 replays that wait."""
        return statistics.median(g.replay(wait=True) for _ in range(7))

    def replay_spans(g: Any) -> dict[str, float]:
        """Where a replay's CPU time goes up to the doorbell: microseconds from the call of
        replay() to the entry (and return) of the steps it takes, medians of 21 replays that
        each follow a synchronize (the wrappers that take the times add a little to each)."""
        ch = dev.compute_channel
        marks: dict[str, float] = {}
        steps = [(g, "_check_live"), (g, "_submit_segments"), (ch, "submit_spans"),
                 (ch, "publish")]
        saved = [(obj, name, obj.__dict__.get(name)) for obj, name in steps]

        def timed(fn: Any, name: str) -> Any:
            def call(*a: Any) -> Any:
                marks.setdefault(name, time.perf_counter())
                r = fn(*a)
                marks.setdefault(name + " returned", time.perf_counter())
                return r
            return call
        for obj, name in steps:
            setattr(obj, name, timed(getattr(obj, name), name))
        rows = []
        try:
            for _ in range(21):
                dev.synchronize()
                marks.clear()
                t = time.perf_counter()
                g.replay()
                end = time.perf_counter()
                rows.append({k: (v - t) * 1e6 for k, v in marks.items()} | {"end": (end - t) * 1e6})
        finally:
            for obj, name, old in saved:
                if old is None:
                    delattr(obj, name)
                else:
                    setattr(obj, name, old)
        return {k: statistics.median(r[k] for r in rows) for k in rows[0]}

    chain = dev.graph([Launch(prg, (x, 1024), gs, ls) for _ in range(N)])
    chain_t, chain_cpu = graph_figures(chain)
    chain_t_spin, _ = graph_figures(chain, spin=True)
    spans = replay_spans(chain)
    native = dict(chain._native)
    chain._native.clear()
    spans_python = replay_spans(chain)  # the Python route, step by step
    chain._native.update(native)
    idle: dict[str, float] = {}
    dev.synchronize()
    for name, fn in (("synchronize", dev.synchronize),
                     ("timeline wait", lambda: dev.timeline_signal.wait(dev.timeline_value)),
                     ("fault check", dev.check_fault)):
        ts = []
        for _ in range(2001):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        idle[name] = statistics.median(ts) * 1e6
    # the same replays with each replay's submissions built afresh (the route a replay takes
    # while a profiler is attached, and every replay's before they were built once)
    native = dict(chain._native)
    chain._native.clear()
    # swaps the method on this one graph for these replays (the class's comes back after them)
    with mock.patch.object(chain, "_submit_segments", chain._submit_built):
        chain_t_built, chain_cpu_built = graph_figures(chain)
    chain._native.update(native)
    out: dict[str, Any] = {"launch_wait_median": statistics.median(lat), "launch_wait_min": min(lat),
                           "b2b": statistics.median(b2b), "b2b_cpu": statistics.median(b2b_cpu),
                           "graph_chain": chain_t, "graph_chain_cpu": chain_cpu,
                           "graph_chain_spin": chain_t_spin,
                           "graph_chain_built": chain_t_built,
                           "graph_chain_cpu_built": chain_cpu_built,
                           "graph_chain_gpu": gpu_time(chain), "graph_replay_spans_us": spans,
                           "graph_replay_spans_python_us": spans_python,
                           "idle_wait_us": idle}
    # early start, and (the shape scripts/sniff_cuda_launches.py saw CUDA's PDL graphs gain from
    # the trigger at) 53 CTAs of 96 threads over 53 * 96 elements of y
    wide = 53 * 96
    y = dev.alloc(4 * wide)
    dev.copyin(y, np.zeros(wide, np.uint32))
    for key, kernel, shape in (("graph_chain_early", prg_wait, (x, 1024, gs, ls)),
                               ("graph_chain_trigger", prg_trigger, (x, 1024, gs, ls)),
                               ("graph_chain_early_wide", prg_wait, (y, wide, (53, 1, 1),
                                                                     (96, 1, 1))),
                               ("graph_chain_trigger_wide", prg_trigger, (y, wide, (53, 1, 1),
                                                                          (96, 1, 1)))):
        buf, n, grid, block = shape
        g = dev.graph([Launch(kernel, (buf, n), grid, block, early_start=True)
                       for _ in range(N)])
        out[key], out[key + "_cpu"] = graph_figures(g)
        out[key + "_gpu"] = gpu_time(g)
        out[key + "_spin"], _ = graph_figures(g, spin=True)
        if key == "graph_chain_early" and g._native:
            # the same replays through the Python route (what the native call accelerates)
            native = dict(g._native)
            g._native.clear()
            out[key + "_python"], out[key + "_python_cpu"] = graph_figures(g)
            out[key + "_python_spin"], _ = graph_figures(g, spin=True)
            g._native.update(native)
            out[key + "_spin_wait"], _ = graph_figures(g, spin=True, sync=False)
        g.free()
    try:
        indep = dev.graph([Launch(prg, (slices.slice(4096 * i, 4096), 1024), gs, ls, after=())
                           for i in range(N)])
    except TypeError as e:  # a runtime without dependency edges
        out["graph_indep_error"] = str(e)
    else:
        out["graph_indep"], out["graph_indep_cpu"] = graph_figures(indep)
        indep.free()
    chain.free()
    want_x = 200 + 2000 + 9 * N + (3 * 22 + 2 * 21 + 7 + 2 * (2 * 22 + 7) + 3 * 22) * N
    res = np.zeros(1024, np.uint32)
    dev.copyout(res, x)
    out["ok"] = bool((res == want_x).all())
    res = np.zeros(wide, np.uint32)
    dev.copyout(res, y)
    out["ok"] = out["ok"] and bool((res == 2 * (2 * 22 + 7) * N).all())
    if "graph_indep" in out:
        s = np.zeros(N * 1024, np.uint32)
        dev.copyout(s, slices)
        out["ok"] = out["ok"] and bool((s == 22).all())
    dev.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--skip-cuda", action="store_true")
    ap.add_argument("--skip-torch", action="store_true")
    args = ap.parse_args()
    res: dict[str, Any] = {}
    if not args.skip_cuda:
        res["cuda_cpp"] = cuda_cpp()
        print("CUDA C++:", json.dumps(res["cuda_cpp"]), flush=True)
    if not args.skip_torch:
        res["torch"] = torch_graph()
        print("PyTorch:", json.dumps(res["torch"]), flush=True)
    res["ours"] = ours(args.device)
    print("runtime.hcq:", json.dumps(res["ours"]), flush=True)
    c, t, o = res.get("cuda_cpp", {}), res.get("torch", {}), res["ours"]

    def f(d: dict[str, Any], k: str, scale: float, unit: str) -> str:
        return f"{d[k] * scale:.3f} {unit}" if isinstance(d.get(k), (int, float)) else "-"
    rows = [("launch + wait, median", "launch_sync_median", "launch_sync_median",
             "launch_wait_median", 1e6, "us"),
            ("1000 launches, one wait", "b2b", None, "b2b", 1e3, "ms"),
            ("graph of 1000 chained launches", "graph_chain", "graph_chain", "graph_chain", 1e3,
             "ms"),
            ("  the same, GPU time (timestamps)", None, None, "graph_chain_gpu", 1e3, "ms"),
            ("  the same, the CPU polling throughout (as CUDA's)", None, None,
             "graph_chain_spin", 1e3, "ms"),
            ("  the same, each replay's submissions built afresh", None, None,
             "graph_chain_built", 1e3, "ms"),
            ("graph of 1000 chained launches, early start (kernels wait)", "graph_chain_pdl",
             None, "graph_chain_early", 1e3, "ms"),
            ("  the same, GPU time (timestamps)", None, None, "graph_chain_early_gpu", 1e3, "ms"),
            ("  the same, the CPU polling throughout (as CUDA's)", None, None,
             "graph_chain_early_spin", 1e3, "ms"),
            ("  the same, replayed through the Python route", None, None,
             "graph_chain_early_python", 1e3, "ms"),
            ("  the same, Python route, the CPU polling throughout", None, None,
             "graph_chain_early_python_spin", 1e3, "ms"),
            ("  polling throughout, ended by the timeline's wait alone", None, None,
             "graph_chain_early_spin_wait", 1e3, "ms"),
            ("  replay CPU, one call / the Python route", None, None, "graph_chain_early_cpu",
             1e6, "us"),
            ("", None, None, "graph_chain_early_python_cpu", 1e6, "us"),
            ("the same, kernels trigger (launch_dependents, then wait)",
             "graph_chain_pdl_trigger", None, "graph_chain_trigger", 1e3, "ms"),
            ("  the same, GPU time (timestamps)", None, None, "graph_chain_trigger_gpu", 1e3,
             "ms"),
            ("early start, 53 x 96 threads, kernels wait", "graph_chain_pdl_wide", None,
             "graph_chain_early_wide", 1e3, "ms"),
            ("early start, 53 x 96 threads, kernels trigger", "graph_chain_pdl_trigger_wide",
             None, "graph_chain_trigger_wide", 1e3, "ms"),
            ("graph of 1000 independent launches", "graph_indep", None, "graph_indep", 1e3, "ms"),
            ("graph replay CPU per launch", "graph_chain_cpu", None, "graph_chain_cpu", 1e3,
             "us"),
            ("  the same, built afresh per replay", None, None, "graph_chain_cpu_built", 1e3,
             "us")]
    print(f"\n{'figure':58} {'CUDA C++':>14} {'PyTorch':>14} {'runtime.hcq':>14}")
    for name, ck, tk, ok, scale, unit in rows:
        print(f"{name:58} {f(c, ck, scale, unit) if ck else '-':>14} "
              f"{f(t, tk, scale, unit) if tk else '-':>14} {f(o, ok, scale, unit):>14}")
    for key, what in (("graph_replay_spans_us", ""), ("graph_replay_spans_python_us",
                                                      ", the Python route"),
                      ("idle_wait_us", "")):
        if isinstance(o.get(key), dict):
            label = ("nothing to wait for, CPU (us)" if key == "idle_wait_us" else
                     f"replay of the chain{what}, CPU from the call (us)")
            print(f"\n{label}: " + ", ".join(f"{k} {v:.1f}" for k, v in o[key].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0 if o.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
