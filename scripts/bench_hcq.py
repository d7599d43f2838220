#!/usr/bin/env python3
"""HCQ runtime benchmarks: prints a table and writes JSON.

Sections (each a function returning `Result`s, registered in `SECTIONS`):
- mock: the AMD driver on the mock GPU: PM4/SDMA command building rate (the hot path), patched
  resubmission, signal round trips through the mock, launch + wait, graph replay, copies.
- rdna3: the RDNA3 interpreter (scripts/bench_rdna3.py, `run(quick) -> list[dict|Result]`), when
  present.
- nvidia: reserved for the NVIDIA driver on the device (launch latency, back-to-back launches, graph
  replay, copy bandwidth, against CUDA through CuPy/PyTorch); add `bench_nvidia` below.

    python scripts/bench_hcq.py [--sections mock,rdna3] [--quick] [--json bench_hcq.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

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


SECTIONS: dict[str, Callable[[bool], list[Result]]] = {
    "mock": bench_mock,
    "rdna3": bench_rdna3,
    # "nvidia": bench_nvidia, -- added with the NVIDIA driver (runs on the device)
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="mock", help=f"comma list of {sorted(SECTIONS)}")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--json", default="bench_hcq.json", help="where to write the results")
    args = ap.parse_args(argv)
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
