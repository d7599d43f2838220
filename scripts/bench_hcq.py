#!/usr/bin/env python3
"""HCQ runtime benchmarks: prints a table and writes JSON.

Sections (each a function returning `Result`s, registered in `SECTIONS`):
- mock: the AMD driver on the mock GPU: PM4/SDMA command building rate (the hot path), patched
  resubmission, signal round trips through the mock, launch + wait, graph replay, copies.
- rdna3: the RDNA3 interpreter (scripts/bench_rdna3.py, `run(quick) -> list[dict|Result]`), when
  present.
- mockkern: the committed Triton kernels on the mock AMD GPU (RDNA3 interpreter) and the mock
  NVIDIA GPU (PTX interpreter) side by side.
- mocklaunch: an empty kernel's launch + wait on both mocks, in the asynchronous mode (the GPU on
  its own thread, the default) and the deterministic one (HCQ_MOCK_SYNC=1): median wall time and
  CPU time (all threads) per launch, with the load average.
- nvcpu: the CPU cost per launch of each NVIDIA launch route (hot path with the C helper and in
  Python, short path, queue path) on mock-nv with the doorbell silenced, so that only building
  and publishing is timed (`bench_nv_launch_cpu`).
- nvidia: the NVIDIA driver on a real GPU (launch latency, back-to-back launches, graph replay,
  copy bandwidth), side by side with CUDA through CuPy and PyTorch measured in a subprocess
  (`bench_nvidia`; `--nv` is short for `--sections nvidia`).

    python scripts/bench_hcq.py [--sections mock,rdna3,mockkern,mocklaunch,nvcpu] [--quick]
                                [--json bench_hcq.json] [--baseline REF [--rounds N]]
    python scripts/bench_hcq.py --nv --json $OUT/bench_nv.json

`--baseline REF`: the sections of this tree and of the commit REF (`git archive`, run with its
own generated bindings) in alternation, one fresh process per tree and round (the trees take
turns going first), so both see the same load; prints the median over the rounds of each
benchmark for both trees.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# shared/ lies beside the checkout (as CI lays it out)
GUIDES = Path(__file__).resolve().parents[1].parent / "shared" / "guides" / "amd_kernels"


@dataclass
class Result:
    """One measured figure."""

    section: str
    name: str
    value: float
    unit: str
    note: str = ""


def _best(fn: Callable[[], float], repeats: int) -> float:
    """Median of `repeats` runs of `fn` (which returns seconds)."""
    return statistics.median(fn() for _ in range(repeats))


# ------------------------------------------------------------------------------------ mock section
def bench_mock(quick: bool) -> list[Result]:
    """The AMD driver against the mock GPU (one CPU core)."""
    from runtime.drivers.amd.device import AMDDevice
    from runtime.hcq import Launch, Var

    out: list[Result] = []
    sec = "mock"
    reps = 3 if quick else 7
    dev = AMDDevice("mock-amd:0")
    s = dev.new_signal()
    prg = None
    if GUIDES.is_dir():
        prg = dev.program((GUIDES / "vector_add.hsaco").read_bytes(), "vector_add")
        bufs = [dev.alloc(1024 * 4) for _ in range(3)]
        kargs = prg.fill_kernargs(bufs, (4, 1, 1), (256, 1, 1))

    # 1. PM4 building: the launch sequence a runtime emits (wait, barrier, dispatch, signal).
    n_cmds = 2000 if quick else 10000

    def build_pm4() -> float:
        q = dev.compute_queue()
        t = time.perf_counter()
        for i in range(n_cmds):
            q.wait(s, i).memory_barrier()
            if prg is not None:
                q.exec(prg, kargs, (4, 1, 1), (256, 1, 1))
            q.signal(s, i + 1)
        dt = time.perf_counter() - t
        build_pm4.dwords = len(q)  # type: ignore[attr-defined]
        return dt

    dt = _best(build_pm4, reps)
    dw = build_pm4.dwords  # type: ignore[attr-defined]
    what = "wait+barrier+exec+signal" if prg is not None else "wait+barrier+signal"
    out.append(Result(sec, "PM4 build rate", dw / dt / 1e6, "M dwords/s", f"{what}, one core"))
    out.append(Result(sec, "PM4 launches built", n_cmds / dt / 1e3, "k launches/s", what))

    def build_sdma() -> float:
        q = dev.copy_queue()
        t = time.perf_counter()
        for i in range(n_cmds):
            q.wait(s, i).copy(0x10000, 0x20000, 4096).signal(s, i + 1)
        build_sdma.dwords = len(q)  # type: ignore[attr-defined]
        return time.perf_counter() - t

    dt = _best(build_sdma, reps)
    out.append(Result(sec, "SDMA build rate", build_sdma.dwords / dt / 1e6,  # type: ignore
                      "M dwords/s", "poll+copy+fence x2+fence+trap"))

    # 2. Signal round trip: submit a signal, wait for it (the mock GPU runs on the doorbell).
    n_rt = 300 if quick else 2000
    for name, mk in (("compute", dev.compute_queue), ("copy", dev.copy_queue)):
        def rt() -> float:
            t = time.perf_counter()
            for _ in range(n_rt):
                v = dev.next_timeline()
                mk().signal(dev.timeline_signal, v).submit()
                dev.timeline_signal.wait(v)
            return (time.perf_counter() - t) / n_rt
        out.append(Result(sec, f"signal round trip ({name})", _best(rt, reps) * 1e6, "us",
                          "build + ring + doorbell + mock execution + CPU wait"))

    # 3. Patched resubmission of a prebuilt queue versus rebuilding it.
    v = Var("v")
    q = dev.compute_queue().wait(s, v).memory_barrier().signal(s, v + 1)

    def resubmit() -> float:
        base = s.value
        t = time.perf_counter()
        for i in range(n_rt):
            q.submit({v: base + i})
        s.wait(base + n_rt)
        return (time.perf_counter() - t) / n_rt
    out.append(Result(sec, "patched resubmit", _best(resubmit, reps) * 1e6, "us",
                      "update Var + submit, mock executes"))

    if prg is not None and _executor():
        # 4. Launch + wait of vector_add (4 x 256 threads) in the RDNA3 interpreter.
        n_l = 10 if quick else 40

        def launch() -> float:
            t = time.perf_counter()
            for _ in range(n_l):
                prg(*bufs, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True)
            return (time.perf_counter() - t) / n_l
        out.append(Result(sec, "launch + wait (vector_add 1024 thr)", _best(launch, reps) * 1e3,
                          "ms", "dominated by the interpreter"))
        g = dev.graph([Launch(prg, tuple(bufs), (4, 1, 1), (256, 1, 1))] * 4)

        def replay() -> float:
            t = time.perf_counter()
            for _ in range(n_l // 2):
                g.replay(wait=True)
            return (time.perf_counter() - t) / (n_l // 2)
        out.append(Result(sec, "graph replay (4 launches)", _best(replay, reps) * 1e3, "ms",
                          "one INDIRECT_BUFFER per replay"))

    # 5. Copies through staging buffers and the SDMA engine of the mock.
    import numpy as np
    size = (16 if quick else 64) << 20
    host = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    back = np.empty_like(host)
    buf = dev.alloc(size)

    def cin() -> float:
        t = time.perf_counter()
        dev.copyin(buf, host)
        dev.synchronize()
        return time.perf_counter() - t

    def cout() -> float:
        t = time.perf_counter()
        dev.copyout(back, buf)
        return time.perf_counter() - t
    out.append(Result(sec, f"copyin {size >> 20} MiB", size / _best(cin, reps) / 1e9, "GB/s",
                      "host -> staging -> SDMA (mock memcpy)"))
    out.append(Result(sec, f"copyout {size >> 20} MiB", size / _best(cout, reps) / 1e9, "GB/s",
                      "SDMA -> staging -> host"))
    assert np.array_equal(host, back)
    dev.close()
    return out


def _executor() -> bool:
    try:
        from runtime.drivers.mock.rdna3 import execute  # noqa: F401
        return True
    except ImportError:
        return False


# ------------------------------------------------------------------------------------ rdna3 section
def bench_rdna3(quick: bool) -> list[Result]:
    """Delegates to scripts/bench_rdna3.py (the interpreter author's), if it exists."""
    path = ROOT / "scripts" / "bench_rdna3.py"
    if not path.exists():
        return [Result("rdna3", "skipped", 0, "", "scripts/bench_rdna3.py not present")]
    spec = importlib.util.spec_from_file_location("bench_rdna3", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    run = getattr(mod, "run", None)
    if run is None:
        return [Result("rdna3", "skipped", 0, "", "bench_rdna3.py has no run(quick)")]
    res = []
    for r in run(quick):
        res.append(r if isinstance(r, Result) else Result(**{"section": "rdna3", **dict(r)}))
    return res


# -------------------------------------------------------------------------- mock kernels section
def bench_mock_kernels(quick: bool) -> list[Result]:
    """The committed Triton kernels on both mocks side by side (mock AMD: gfx1100 code through the
    RDNA3 interpreter; mock NVIDIA: their PTX through the PTX interpreter), launch + wait of each
    at the Triton-loader tests' sizes."""
    import numpy as np

    from runtime.hcq import open_device
    from runtime.hcq.triton import load_triton
    data = ROOT / "tests" / "runtime" / "data" / "triton"
    reps = 3 if quick else 10
    rng = np.random.default_rng(0)
    n, R, C, M = 1000, 8, 100, 64
    x = rng.standard_normal(n, dtype=np.float32)
    m = rng.standard_normal((R, C), dtype=np.float32)
    a = rng.standard_normal((M, M)).astype(np.float16)
    times: dict[str, dict[str, float]] = {}
    out: list[Result] = []
    for name, tdir in (("mock-amd:0", "gfx1100"), ("mock-nv:0", "sm90")):
        dev = open_device(name)
        try:
            def buf(arr: Any) -> Any:
                b = dev.alloc(arr.nbytes)
                dev.copyin(b, arr)
                return b
            X, MB, AB = buf(x), buf(m), buf(a)
            O, MO, CO = dev.alloc(4 * n), dev.alloc(m.nbytes), dev.alloc(M * M * 4)
            W = buf(np.ones(C, np.float32))
            calls = {
                "vector_add": lambda k: k(X, X, O, n, grid=(-(-n // 256),), wait=True),
                "softmax": lambda k: k(MO, MB, C, C, C, grid=(R,), wait=True),
                "layer_norm": lambda k: k(MB, MO, W, W, C, C, 1e-5, grid=(R,), wait=True),
                "matmul": lambda k: k(AB, AB, CO, M, M, M, M, M, M, grid=(M // 32, M // 32),
                                      wait=True),
                "dropout": lambda k: k(X, O, n, 0.5, 123, grid=(-(-n // 256),), wait=True),
            }
            for kname, call in calls.items():
                k = load_triton(dev, data / tdir / kname)
                call(k)  # compile/warm up

                def once(k: Any = k, call: Any = call) -> float:
                    t = time.perf_counter()
                    call(k)
                    return time.perf_counter() - t
                times.setdefault(kname, {})[name] = _best(once, reps)
        finally:
            dev.close()
    for kname, t in times.items():
        amd, nv = t["mock-amd:0"], t["mock-nv:0"]
        out.append(Result("mockkern", f"triton {kname} mock-amd", amd * 1e3, "ms", "launch+wait"))
        out.append(Result("mockkern", f"triton {kname} mock-nv", nv * 1e3, "ms",
                          f"launch+wait, {nv / amd:.2f}x mock-amd (target <= 2x)"))
    return out


# ------------------------------------------------------------------------ mock launch section
def bench_mock_launch(quick: bool) -> list[Result]:
    """An empty kernel's launch + wait on each mock (AMD: clang's gfx1100 code object of an empty
    OpenCL kernel, one wave; NVIDIA: NVRTC's PTX of an empty kernel, one thread), in the
    asynchronous mode and the deterministic one: the median wall time of single launches and the
    CPU time per launch of every thread (the GPU's thread included), with the load average."""
    import os

    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.mock.os import MockOS
    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import AMDDevice

    n = 100 if quick else 400
    out: list[Result] = []
    for vendor in ("amd", "nv"):
        for sync in (False, True):
            mode = "HCQ_MOCK_SYNC=1" if sync else "asynchronous"
            label = f"mock-{vendor} empty launch+wait, {mode}"
            mos: Any = MockOS.with_amd_gpus(1) if vendor == "amd" else NvMockOS.with_nv_gpus(1)
            for d in mos.drivers:
                for g in d.gpus:
                    g.sync = sync
            dev: Any = AMDDevice("amd:0", os=mos) if vendor == "amd" else \
                NVDevice("mock-nv:0", os=mos)
            try:
                if vendor == "amd":
                    prg = dev.program(dev.compiler.compile("__kernel void e(__global int *o) {}"),
                                      "e")
                    args: tuple[Any, ...] = (dev.alloc(64),)
                    local = (32, 1, 1)
                else:
                    prg = dev.program(dev.compiler.compile(
                        'extern "C" __global__ void empty() {}'), "empty")
                    args, local = (), (1, 1, 1)
                grid = (1, 1, 1)
                for _ in range(30):
                    prg(*args, global_size=grid, local_size=local, wait=True)
                lat = []
                c0 = time.process_time()
                for _ in range(n):
                    t = time.perf_counter()
                    prg(*args, global_size=grid, local_size=local, wait=True)
                    lat.append(time.perf_counter() - t)
                cpu = (time.process_time() - c0) / n
            except Exception as e:  # noqa: BLE001 - a compiler missing: report, go on
                out.append(Result("mocklaunch", label, 0, "", f"skipped: {e}"))
                continue
            finally:
                dev.close()
            target = 60 if vendor == "amd" else 100
            load = os.getloadavg()[0]
            out.append(Result("mocklaunch", label, statistics.median(lat) * 1e6, "us",
                              f"median wall; CPU {cpu * 1e6:.0f} us per launch (all threads); "
                              f"load {load:.1f}; target <= {target} us"))
            out.append(Result("mocklaunch", f"{label}, CPU", cpu * 1e6, "us",
                              "per launch, all threads (time.process_time over the loop)"))
    return out


# -------------------------------------------------------------------------- NV launch CPU section
def bench_nv_launch_cpu(quick: bool) -> list[Result]:
    """What each NVIDIA launch route costs the CPU, on mock-nv with the compute channel's doorbell
    silenced (the mock GPU never runs; between batches the CPU marks the batch complete itself),
    so only building and publishing is timed: the hot path with the native helper and in Python,
    the short path (`vals=`: a launch block from the arena, commands from the template), and the
    queue path (the core's `Program.__call__`: fill_kernargs, a compute queue, submit); and a
    graph's replay, native and in Python, of one segment (one launch) and of three (a copy, a
    wait and a launch, a copy: two channels)."""
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import GraphCopy, GraphWait, Launch
    from runtime.hcq.program import Program

    class _Silent:  # a doorbell the mock GPU does not hear
        def ring(self, token: int) -> None:
            pass

    dev = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))
    out: list[Result] = []
    try:
        cubin = (ROOT / "tests" / "runtime" / "data" / "nv_kernels_cuda13.cubin").read_bytes()
        prg = dev.program(cubin, "vadd")
        a, b, c = (dev.alloc(4096) for _ in range(3))
        dev.synchronize()
        ch, cch = dev.compute_channel, dev.copy_channel
        for c_ in (ch, cch):
            c_.doorbell = _Silent()  # type: ignore[assignment]
            c_.publish = c_._make_publish()  # a benchmark's shortcut: rebind the silent doorbell
        g, l1 = (2, 1, 1), (64, 1, 1)
        batch, reps = 16, (30 if quick else 200)

        def complete() -> None:  # what the GPU would have written
            dev.timeline_signal.value = dev.timeline_value
            ch.progress.value = ch.seq
            cch.progress.value = cch.seq

        opened = dev.new_signal(1)
        graphs = {}
        for native in (True, False):
            dev.launch_native = native
            one = dev.graph([Launch(prg, (a, b, c, 100), g, l1)])
            three = dev.graph([GraphCopy(b, a, 4096), GraphWait(opened, 1),
                               Launch(prg, (a, b, c, 100), g, l1), GraphCopy(a, c, 4096)])
            for gr in (one, three):
                gr.replay()  # the plan built
                complete()
            graphs[native] = (one, three)

        routes: dict[str, Callable[[], object]] = {
            "hot path, native": lambda: prg(a, b, c, 100, global_size=g, local_size=l1),
            "hot path, Python": lambda: prg(a, b, c, 100, global_size=g, local_size=l1),
            "short path (vals=)": lambda: prg(a, b, c, vals=(100,), global_size=g,
                                              local_size=l1),
            "queue path (Program.__call__)": lambda: Program.__call__(
                prg, a, b, c, 100, global_size=g, local_size=l1),
            "graph replay, 1 segment, native": graphs[True][0].replay,
            "graph replay, 1 segment, Python": graphs[False][0].replay,
            "graph replay, 3 segments, native": graphs[True][1].replay,
            "graph replay, 3 segments, Python": graphs[False][1].replay,
        }
        for name, fn in routes.items():
            if name.startswith("graph"):
                gr = graphs[name.endswith("native")][name.startswith("graph replay, 1") and 0 or 1]
                if name.endswith("native") and gr._native.get(False) is None:
                    out.append(Result("nvcpu", name, 0, "", "skipped: no native launch helper"))
                    continue
                if name.endswith("Python"):
                    assert gr._native.get(False) is None
            dev.launch_native = name != "hot path, Python"
            complete()
            prg._release_launchers()  # a fresh specialization for this setting
            fn()
            complete()
            hot = prg._hot.get((g, l1))
            if name == "hot path, native" and (
                    hot is None or type(hot.fn).__name__ != "builtin_function_or_method"):
                out.append(Result("nvcpu", name, 0, "", "skipped: no native launch helper"))
                continue

            def run(fn: Callable[[], object] = fn) -> float:
                t = time.perf_counter()
                for _ in range(batch):
                    fn()
                dt = time.perf_counter() - t
                complete()
                return dt / batch
            for _ in range(3):
                run()
            per = "replay" if name.startswith("graph") else "launch"
            out.append(Result("nvcpu", name, _best(run, reps) * 1e6, "us",
                              f"CPU per {per}, mock-nv with a silent doorbell"))
    finally:
        dev.launch_native = True
        dev.close()
    return out


# ------------------------------------------------------------------------------- nvidia section
_NV_SRC = r"""
extern "C" __global__ void inc(unsigned int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
"""
# CUDA through CuPy (launch latency, back-to-back launches; cupy.RawKernel of the same source) and
# PyTorch (cudaMemcpy from pinned and from pageable memory), in a process of its own.
_NV_CUDA_REF = r"""
import json, sys, time, statistics
out = {}
try:
    import cupy as cp
    k = cp.RawKernel(SRC, "inc")
    x = cp.zeros(1024, dtype=cp.uint32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(100):
            k((4,), (256,), (x, cp.int32(1024)))
        s.synchronize()
        lat = []
        for _ in range(1000):
            t = time.perf_counter(); k((4,), (256,), (x, cp.int32(1024))); s.synchronize()
            lat.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(1000):
            k((4,), (256,), (x, cp.int32(1024)))
        s.synchronize()
        b2b = time.perf_counter() - t
    lat.sort()
    out["cupy"] = dict(min=lat[0], median=statistics.median(lat), p90=lat[900], b2b=b2b,
                       version=cp.__version__)
except Exception as e:  # report, do not fail the whole benchmark
    out["cupy_error"] = repr(e)
try:
    import torch
    d = {}
    for mib in SIZES:
        n = mib << 20
        dev = torch.empty(n, dtype=torch.uint8, device="cuda")
        for pinned in (True, False):
            host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
            host.fill_(1)
            for direction in ("h2d", "d2h"):
                best = []
                for _ in range(REPS):
                    torch.cuda.synchronize(); t = time.perf_counter()
                    (dev.copy_(host) if direction == "h2d" else host.copy_(dev))
                    torch.cuda.synchronize(); best.append(time.perf_counter() - t)
                d[f"{direction} {'pinned' if pinned else 'pageable'} {mib}"] = n / min(best) / 1e9
    x = torch.zeros(1024, dtype=torch.int32, device="cuda")
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    lat = []
    for _ in range(1000):
        t = time.perf_counter(); x.add_(1); torch.cuda.synchronize()
        lat.append(time.perf_counter() - t)
    lat.sort()
    out["torch"] = dict(copies=d, min=lat[0], median=statistics.median(lat), p90=lat[900],
                        version=torch.__version__)
except Exception as e:
    out["torch_error"] = repr(e)
try:  # Triton's own launcher (JIT on this machine) for the kernel the loader runs
    import importlib.util, tempfile
    import torch, triton
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(TRITON_SRC)
    spec = importlib.util.spec_from_file_location("bench_triton_kernels", f.name)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    n = 1 << 16
    a, b, c = (torch.ones(n, device="cuda") for _ in range(3))
    grid = (n // 256,)
    for _ in range(100):
        mod.vector_add[grid](a, b, c, n, BLOCK=256)
    torch.cuda.synchronize()
    best = []
    for _ in range(REPS):
        t = time.perf_counter()
        for _ in range(1000):
            mod.vector_add[grid](a, b, c, n, BLOCK=256)
        torch.cuda.synchronize(); best.append(time.perf_counter() - t)
    out["triton"] = dict(b2b=min(best), version=triton.__version__)
except Exception as e:
    out["triton_error"] = repr(e)
print("JSON" + json.dumps(out))
"""
# The Triton kernel both launchers run (tests/runtime/data/triton/sm90/vector_add is this one,
# compiled ahead of time by scripts/build_triton_kernels.py).
_TRITON_SRC = """
import triton
import triton.language as tl

@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
             mask=m)
"""


_NV_DEVICE = ["nv:0"]  # --nv-device ("mock-nv:0" runs the section's code against the mock GPU)
_NV_CUDA = [True]      # --no-cuda leaves the CUDA reference out


def bench_nvidia(quick: bool) -> list[Result]:
    """The NVIDIA driver (raw RM/UVM ioctls) on a real GPU, with CUDA's figures beside it."""
    import subprocess

    import numpy as np

    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import Launch, MemKind

    sec = "nvidia"
    out: list[Result] = []
    sizes = [1, 16, 64, 256] if quick else [1, 16, 64, 256, 1024]
    reps = 3 if quick else 5
    # -- CUDA first, in its own process (libcuda and this runtime never share one)
    code = _NV_CUDA_REF.replace("TRITON_SRC", repr(_TRITON_SRC)).replace("SRC", repr(_NV_SRC)) \
        .replace("SIZES", repr(sizes)).replace("REPS", str(reps))
    ref: dict[str, Any]  # the CUDA process's JSON: per library a dict of figures, or errors
    if _NV_CUDA[0]:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300)
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith("JSON")), None)
        ref = json.loads(line[4:]) if line else {"error": (r.stderr or r.stdout)[-2000:]}
    else:
        ref = {}
    for k in ("cupy_error", "torch_error", "triton_error", "error"):
        if k in ref:
            out.append(Result("cuda", k, 0, "", ref[k][:200]))
    cupy, torch_ = ref.get("cupy", {}), ref.get("torch", {})

    dev = NVDevice(_NV_DEVICE[0])
    prg = dev.program(dev.compiler.compile(_NV_SRC), "inc")
    x = dev.alloc(1024 * 4)
    dev.copyin(x, np.zeros(1024, np.uint32))

    def launch() -> None:
        prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))

    for _ in range(200):
        launch()
    dev.synchronize()
    # 1. launch latency: submit -> completion observed by the CPU (the timeline value)
    tl = dev.timeline_signal
    lat = []
    for _ in range(1000):
        t = time.perf_counter()
        launch()
        tl.wait(dev.timeline_value)
        lat.append(time.perf_counter() - t)
    lat.sort()
    us = 1e6
    out += [Result(sec, "launch+wait min", lat[0] * us, "us",
                   f"CuPy {cupy.get('min', 0) * us:.1f}"),
            Result(sec, "launch+wait median", statistics.median(lat) * us, "us",
                   f"CuPy {cupy.get('median', 0) * us:.1f}, PyTorch add_ "
                   f"{torch_.get('median', 0) * us:.1f}; target <= 5"),
            Result(sec, "launch+wait p90", lat[900] * us, "us",
                   f"CuPy {cupy.get('p90', 0) * us:.1f}")]
    # 2. 1000 back-to-back launches, one wait at the end
    b2b_cpu: list[float] = []

    def b2b() -> float:
        t = time.perf_counter()
        for _ in range(1000):
            launch()
        b2b_cpu.append(time.perf_counter() - t)
        dev.synchronize()
        return time.perf_counter() - t
    out.append(Result(sec, "1000 launches, one wait", _best(b2b, reps) * 1e3, "ms",
                      f"CuPy {cupy.get('b2b', 0) * 1e3:.2f} ms; target <= 3; CPU submit "
                      f"{min(b2b_cpu) * 1e3:.2f} ms of it"))
    # 2b. the documented paths: wait=True (returns the GPU time) against launch + synchronize
    def waited() -> None:
        prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True)

    def synced() -> None:
        launch()
        dev.synchronize()

    med = {}
    for name, fn in (("wait", waited), ("sync", synced)):
        ts = []
        for _ in range(1000):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        med[name] = statistics.median(ts)
    gpu = prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True) or 0.0
    out.append(Result(sec, "prg(wait=True) median", med["wait"] * us, "us",
                      f"launch + synchronize {med['sync'] * us:.2f} us, ratio "
                      f"{med['wait'] / med['sync']:.2f} (target <= 1.3); GPU time returned "
                      f"{gpu * us:.2f} us; CuPy launch+sync {cupy.get('median', 0) * us:.1f}"))
    # 2c. numpy scalars of every width against Python ints: 1000 launches each
    def b2b_with(n_arg: Any) -> Callable[[], float]:
        def run() -> float:
            t = time.perf_counter()
            for _ in range(1000):
                prg(x, n_arg, global_size=(4, 1, 1), local_size=(256, 1, 1))
            dev.synchronize()
            return time.perf_counter() - t
        return run
    base = _best(b2b_with(1024), reps)
    for t_ in (np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32):
        dt = _best(b2b_with(t_(min(1024, np.iinfo(t_).max))), reps)
        out.append(Result(sec, f"1000 launches, {t_.__name__} arg", dt * 1e3, "ms",
                          f"Python int {base * 1e3:.2f} ms, {dt / base * 100 - 100:+.0f}% "
                          "(target within 10%)"))
    # 2d. a Triton kernel through the loader against Triton's own launcher
    from runtime.hcq.triton import load_triton
    tri = load_triton(dev, Path(__file__).resolve().parents[1] / "tests" / "runtime" / "data"
                      / "triton" / "sm90" / "vector_add")
    nt = 1 << 16
    ta, tb, tc = (dev.alloc(4 * nt) for _ in range(3))
    tgrid = (nt // 256,)

    def tri_b2b() -> float:
        t = time.perf_counter()
        for _ in range(1000):
            tri(ta, tb, tc, nt, grid=tgrid)
        dev.synchronize()
        return time.perf_counter() - t
    tri_b2b()
    triton_ref = ref.get("triton", {})
    out.append(Result(sec, "1000 Triton vector_add launches", _best(tri_b2b, reps) * 1e3, "ms",
                      f"Triton's launcher {triton_ref.get('b2b', 0) * 1e3:.2f} ms "
                      f"(triton {triton_ref.get('version', '?')}); runtime.hcq.triton loader"))
    # 3. graph replay: CPU cost per launch, and the whole replay
    n_graph = 1000
    g = dev.graph([Launch(prg, (x, 1024), (4, 1, 1), (256, 1, 1)) for _ in range(n_graph)])
    g.replay(wait=True)

    def replay_cpu() -> float:
        dev.synchronize()
        t = time.perf_counter()
        g.replay()
        dt = time.perf_counter() - t
        dev.synchronize()
        return dt

    def replay_all() -> float:
        t = time.perf_counter()
        g.replay()
        dev.synchronize()
        return time.perf_counter() - t
    out.append(Result(sec, "graph replay CPU / launch", _best(replay_cpu, reps) / n_graph * us,
                      "us", f"{n_graph} launches per replay; target <= 1"))
    out.append(Result(sec, "graph replay wall / launch", _best(replay_all, reps) / n_graph * us,
                      "us", "submit + GPU execution (dependent launches linked through their QMDs)"))
    g.free()
    # 4. copies: pinned host memory through the copy engine; pageable numpy through staging
    tcopies = torch_.get("copies", {})
    for mib in sizes:
        n = mib << 20
        vram = dev.alloc(n)
        pinned = dev.alloc(n, kind=MemKind.HOST, cpu_access=True)
        np.frombuffer(pinned.cpu_view(), np.uint8)[:] = 1
        page = np.ones(n, np.uint8)

        def dma(dst: Any, src: Any) -> float:
            t = time.perf_counter()
            dev.transfer(dst, src, n)
            tl.wait(dev.timeline_value)
            return time.perf_counter() - t

        def timed(fn: Callable[[], None]) -> float:
            dev.synchronize()
            t = time.perf_counter()
            fn()
            dev.synchronize()
            return time.perf_counter() - t

        rows = [("h2d pinned", min(dma(vram, pinned) for _ in range(reps))),
                ("d2h pinned", min(dma(pinned, vram) for _ in range(reps))),
                ("h2d pageable", min(timed(lambda: dev.copyin(vram, page)) for _ in range(reps))),
                ("d2h pageable", min(timed(lambda: dev.copyout(page, vram)) for _ in range(reps)))]
        for name, dt in rows:
            cuda = tcopies.get(f"{name} {mib}", 0.0)
            ratio = f", {n / dt / 1e9 / cuda * 100:.0f}% of CUDA" if cuda else ""
            out.append(Result(sec, f"copy {name} {mib} MiB", n / dt / 1e9, "GB/s",
                              f"cudaMemcpy {cuda:.1f} GB/s{ratio}; target >= 90%"))
        dev.free(vram)
        dev.free(pinned)
    for name, val in (("CuPy", cupy.get("version")), ("PyTorch", torch_.get("version"))):
        if val:
            out.append(Result("cuda", f"{name} version", 0, "", str(val)))
    out.append(Result("ref", "tinygrad 0.14 + Hopper patch", 133, "us",
                      "launch+wait median (125 / 133 / 147); 87 ms per 1000; copies 3-5 GB/s "
                      "(issue's reference figures, not measured here)"))
    out.append(Result(sec, "device", 0, "", repr(dev)))
    dev.close()
    return out


SECTIONS: dict[str, Callable[[bool], list[Result]]] = {
    "mock": bench_mock,
    "rdna3": bench_rdna3,
    "nvidia": bench_nvidia,
    "mockkern": bench_mock_kernels,
    "mocklaunch": bench_mock_launch,
    "nvcpu": bench_nv_launch_cpu,
}


# Runs a tree's bench_hcq.py with that tree's generated bindings as `hcq_bindings` (the
# environment's editable install maps the name to the checkout's own generated/).
_RUN_TREE = """
import importlib.util, runpy, sys
tree = sys.argv[1]
spec = importlib.util.spec_from_file_location(
    "hcq_bindings", tree + "/generated/__init__.py",
    submodule_search_locations=[tree + "/generated"])
mod = importlib.util.module_from_spec(spec)
sys.modules["hcq_bindings"] = mod
spec.loader.exec_module(mod)
sys.argv = [tree + "/scripts/bench_hcq.py"] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def compare_with_baseline(sections: str, quick: bool, ref: str, rounds: int,
                          json_path: str) -> int:
    """The sections in this tree and in `ref`'s, alternately (`--baseline`): per benchmark the
    median over the rounds of each tree's value, and baseline / this (> 1: this tree is lower,
    which for times means faster)."""
    with tempfile.TemporaryDirectory(prefix="bench_hcq_baseline_") as tmp:
        base = Path(tmp) / "tree"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref],
                                 capture_output=True)
        if archive.returncode:
            print(f"--baseline {ref}: git archive failed: {archive.stderr.decode().strip()}",
                  file=sys.stderr)
            return 2
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        runs: dict[str, list[list[dict[str, Any]]]] = {"baseline": [], "this": []}
        for r in range(rounds):
            # each tree goes first in every other round (the first of a pair runs colder)
            pair = (("baseline", base), ("this", ROOT))
            for label, tree in pair if r % 2 == 0 else pair[::-1]:
                out = Path(tmp) / f"{label}-{r}.json"
                cmd = [sys.executable, "-c", _RUN_TREE, str(tree), "--sections", sections,
                       "--json", str(out)] + (["--quick"] if quick else [])
                done = subprocess.run(cmd, capture_output=True, text=True,
                                      env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
                if done.returncode:
                    print(f"{label} round {r}: exit status {done.returncode}\n{done.stderr}",
                          file=sys.stderr)
                    return 2
                runs[label].append(json.loads(out.read_text())["results"])
                print(f"round {r + 1}/{rounds} {label}: load {os.getloadavg()[0]:.1f}")
    by_name: dict[tuple[str, str], dict[str, list[float]]] = {}
    units: dict[tuple[str, str], str] = {}
    for label, rs in runs.items():
        for results in rs:
            names = {res["name"] for res in results}
            for res in list(results):
                # an older tree gives a launch's CPU time in the note only
                cpu = re.search(r"CPU (\d+) us per launch", res["note"])
                if cpu and f"{res['name']}, CPU" not in names:
                    results.append({**res, "name": f"{res['name']}, CPU",
                                    "value": float(cpu.group(1))})
            for res in results:
                if res["unit"]:
                    key = (res["section"], res["name"])
                    by_name.setdefault(key, {}).setdefault(label, []).append(res["value"])
                    units[key] = res["unit"]
    w = max((len(n) for _, n in by_name), default=10)
    print(f"{'section':10} {'benchmark':{w}} {'baseline':>10} {'this':>10} unit  baseline/this"
          f" (median of {rounds} round(s), {ref} vs the working tree)")
    rows = []
    for (sec, name), vals in by_name.items():
        b = statistics.median(vals["baseline"]) if "baseline" in vals else float("nan")
        t = statistics.median(vals["this"]) if "this" in vals else float("nan")
        ratio = b / t if t else float("nan")
        rows.append({"section": sec, "name": name, "unit": units[(sec, name)],
                     "baseline": vals.get("baseline", []), "this": vals.get("this", [])})
        print(f"{sec:10} {name:{w}} {b:10.3f} {t:10.3f} {units[(sec, name)]:5} {ratio:.2f}")
    meta = {"python": platform.python_version(), "baseline": ref, "rounds": rounds,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    Path(json_path).write_text(json.dumps({"meta": meta, "compared": rows}, indent=1))
    print(f"wrote {json_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="mock", help=f"comma list of {sorted(SECTIONS)}")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--json", default="bench_hcq.json", help="where to write the results")
    ap.add_argument("--nv", action="store_true", help="the NVIDIA section (--sections nvidia)")
    ap.add_argument("--nv-device", default="nv:0", help="device of the nvidia section")
    ap.add_argument("--no-cuda", action="store_true", help="leave out the CUDA reference")
    ap.add_argument("--baseline", metavar="REF",
                    help="also run the sections of commit REF, alternating with this tree")
    ap.add_argument("--rounds", type=int, default=3,
                    help="with --baseline: rounds (one process per tree in each)")
    args = ap.parse_args(argv)
    if args.nv:
        args.sections = "nvidia"
    for name in args.sections.split(","):
        if name not in SECTIONS:
            ap.error(f"unknown section {name!r}")
    if args.baseline:
        if args.rounds < 1:
            ap.error("--rounds must be at least 1")
        return compare_with_baseline(args.sections, args.quick, args.baseline, args.rounds,
                                     args.json)
    _NV_DEVICE[0] = args.nv_device
    _NV_CUDA[0] = not args.no_cuda
    results: list[Result] = []
    for name in args.sections.split(","):
        if name not in SECTIONS:
            ap.error(f"unknown section {name!r}")
        results += SECTIONS[name](args.quick)
    w = max(len(r.name) for r in results)
    print(f"{'section':8} {'benchmark':{w}} {'value':>12} unit          note")
    for r in results:
        print(f"{r.section:8} {r.name:{w}} {r.value:12.3f} {r.unit:13} {r.note}")
    meta = {"python": platform.python_version(), "machine": platform.machine(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    Path(args.json).write_text(json.dumps({"meta": meta, "results": [asdict(r) for r in results]},
                                          indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
