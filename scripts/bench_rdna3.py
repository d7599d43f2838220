#!/usr/bin/env python3
"""Benchmark of the RDNA3 interpreter (runtime/drivers/mock/rdna3) beside tinygrad's emulator,
on the same code objects and the same sizes, in one run.

Cases (OpenCL C compiled once with clang-16 for gfx1100; Triton's from tests/runtime/data):
  axpb      c[i] = a[i] + b[i] * 2.0f, one element per lane, 256 per group (many waves)
  reduce    per-workgroup tree sum in LDS with barriers
  loop      ONE wave, a 4096-iteration dependent loop (per-instruction overhead)
  cas       float atomic add by every lane into one address: clang's compare-and-swap retry
            loop under full contention, at 2^10 and 2^12 lanes (how the cost grows)
  triton    Triton 3.6's vector add on its buffer-op path (MUBUF)
and, ours only, an empty kernel's launch + wait through the AMD runtime on the mock GPU.

For each: best-of-N wall time of ours and of the peer (tinygrad's test/mockgpu/amd/emu.py
`run_asm`, run in a subprocess by scripts/rdna3_peer.py from a tinygrad checkout given with
--peer), their ratio, and our wave-instructions/s. The peer's output is checked against numpy
like ours; a case it cannot run is reported with its error.

    python scripts/bench_rdna3.py [--quick] [--peer /path/to/tinygrad] [--json FILE]
`run(quick)` returns the rows for scripts/bench_hcq.py (ours only).
"""
# No `from __future__ import annotations`: scripts/bench_hcq.py loads this file without
# registering it in sys.modules, where dataclasses would look string annotations up.
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.drivers.amd.compiler import AMDCompiler  # noqa: E402
from runtime.drivers.mock.rdna3.loader_for_tests import TestDevice  # noqa: E402

TRITON_DIR = ROOT / "tests" / "runtime" / "data" / "rdna3_real" / "triton"
SOURCES = {
    "axpb": """
__kernel void axpb(__global const float *a, __global const float *b, __global float *c) {
  int i = get_global_id(0);
  c[i] = a[i] + b[i] * 2.0f;
}""",
    # __builtin_amdgcn_s_barrier() rather than barrier(): no cache invalidation between.
    "reduce": """
__kernel void reduce(__global const float *in, __global float *out, int n) {
  __local float s[256];
  int lid = get_local_id(0);
  int i = get_global_id(0);
  s[lid] = i < n ? in[i] : 0.0f;
  __builtin_amdgcn_s_barrier();
  for (int k = 128; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
    __builtin_amdgcn_s_barrier();
  }
  if (lid == 0) out[get_group_id(0)] = s[0];
}""",
    "loop": """
__kernel void loop(__global float *out, int n) {
  float acc = 0.0f; int i = get_global_id(0);
  for (int k = 0; k < n; k++) acc = acc * 0.5f + (float)(k ^ i);
  out[i] = acc;
}""",
    "cas": """
__kernel void cas(__global float *sum, __global const float *v) {
  __hip_atomic_fetch_add(sum, v[get_global_id(0)], __ATOMIC_RELAXED, 4);
}""",
}


@dataclass
class Case:
    """One benchmark: a code object, its arguments (numpy arrays are buffers), the launch
    shape, and a check of the buffers afterwards."""

    name: str
    size: str
    code: bytes
    kernel: str
    args: list[Any]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    check: Callable[[list[np.ndarray]], bool]
    dynamic_lds_B: int = 0
    repeats: int = 3


@dataclass
class Row:
    case: str
    size: str
    ours_ms: float
    peer_ms: float | None
    ratio: float | None
    wave_instructions: int
    ours_wave_instr_per_s: float
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _loop_ref(n: int) -> np.ndarray:
    acc = np.zeros(32, np.float32)
    lane = np.arange(32)
    for k in range(n):
        acc = (acc * np.float32(0.5) + (k ^ lane).astype(np.float32)).astype(np.float32)
    return acc


def cases(quick: bool) -> list[Case]:
    comp = AMDCompiler()
    missing = comp.available()
    if missing:
        raise SystemExit(f"bench_rdna3: {missing}")
    co = {name: comp.compile(src) for name, src in SOURCES.items()}
    rng = np.random.default_rng(0)
    out: list[Case] = []
    for lg in ([14, 16] if quick else [14, 16, 18]):
        n = 1 << lg
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        want = (a.astype(np.float64) + b * 2.0).astype(np.float32)
        out.append(Case("axpb", f"2^{lg}", co["axpb"], "axpb", [a, b, np.zeros(n, np.float32)],
                        (n // 256, 1, 1), (256, 1, 1),
                        lambda bufs, w=want: np.array_equal(bufs[2], w)))
        x = rng.standard_normal(n).astype(np.float32)
        ref = x.reshape(-1, 256).sum(1, dtype=np.float64)
        out.append(Case("reduce", f"2^{lg}", co["reduce"], "reduce",
                        [x, np.zeros(n // 256, np.float32), n], (n // 256, 1, 1), (256, 1, 1),
                        lambda bufs, r=ref: np.allclose(bufs[1], r, rtol=1e-4, atol=1e-4),
                        dynamic_lds_B=0))
    loop_n = 4096
    out.append(Case("loop", f"{loop_n} it", co["loop"], "loop", [np.zeros(32, np.float32), loop_n],
                    (1, 1, 1), (32, 1, 1),
                    lambda bufs: np.array_equal(bufs[0], _loop_ref(loop_n))))
    for lg in ([10, 12] if quick else [10, 11, 12]):
        n = 1 << lg
        v = np.ones(n, np.float32)
        out.append(Case("cas", f"2^{lg} lanes", co["cas"], "cas", [np.zeros(1, np.float32), v],
                        (n // 256, 1, 1), (256, 1, 1),
                        lambda bufs, n=n: float(bufs[0][0]) == n, repeats=1))
    tv = TRITON_DIR / "vector_add.hsaco"
    if tv.exists():
        meta = json.loads((TRITON_DIR / "vector_add.json").read_text())
        n = 1 << 16
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        out.append(Case("triton", "2^16", tv.read_bytes(), meta["name"],
                        [a, b, np.zeros(n, np.float32), n, 0, 0], (n // 1024, 1, 1),
                        (meta["num_warps"] * 32, 1, 1),
                        lambda bufs, w=a + b: np.array_equal(bufs[2], w)))
    return out


def bench_ours(c: Case) -> tuple[float, int, bool]:
    """(best seconds, wave-instructions, correct) on the interpreter through its test loader."""
    dev = TestDevice()
    k = dev.load(c.code, c.kernel)
    best, stats, ok = float("inf"), None, True
    for r in range(c.repeats + 1):   # the first run also decodes the program
        bufs = [dev.upload(a) if isinstance(a, np.ndarray) else a for a in c.args]
        t0 = time.perf_counter()
        stats = dev.launch(k, bufs, c.grid, c.block, dynamic_lds_B=c.dynamic_lds_B) \
            if c.dynamic_lds_B else dev.launch(k, bufs, c.grid, c.block)
        dt = time.perf_counter() - t0
        if r:
            best = min(best, dt)
        got = [dev.download(b, a.size, a.dtype) if isinstance(a, np.ndarray) else a
               for a, b in zip(c.args, bufs)]
        ok = ok and c.check(got)
    assert stats is not None
    return best, stats.wave_instructions, ok


def bench_peer(peer: Path, c: Case) -> float | str:
    """Best seconds of the same code object on tinygrad's emulator, or why not."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        clang = shutil.which("clang-16")
        if clang:
            # tinygrad's CPU backend, which runs the emulator's instruction kernels, calls
            # `clang` (a real clang: it passes --target).
            os.symlink(clang, Path(tmp) / "clang")
            env["PATH"] = f"{tmp}{os.pathsep}{env.get('PATH', '')}"
            env["CC"] = str(Path(tmp) / "clang")
        names = [f"buf{i}" for i, a in enumerate(c.args) if isinstance(a, np.ndarray)]
        it = iter(names)
        meta = {"kernel": c.kernel, "grid": list(c.grid), "block": list(c.block),
                "args": [next(it) if isinstance(a, np.ndarray) else a for a in c.args],
                "repeats": c.repeats, "dynamic_lds_B": c.dynamic_lds_B}
        job = Path(tmp) / "job.npz"
        arrays = {nm: a for nm, a in zip(names, (a for a in c.args
                                                  if isinstance(a, np.ndarray)))}
        np.savez(job, code=np.frombuffer(c.code, np.uint8), meta=json.dumps(meta), **arrays)
        try:
            res = subprocess.run([sys.executable, str(ROOT / "scripts" / "rdna3_peer.py"),
                                  str(peer), str(job)], capture_output=True, text=True, env=env,
                                 timeout=1800)
        except subprocess.TimeoutExpired:
            return "peer took over 30 min"
        if res.returncode != 0:
            last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "?"
            return f"peer failed: {last[:120]}"
        out = np.load(job.with_suffix(".out.npz"))
        got = [out[nm] for nm in names]
        it2 = iter(got)
        full = [next(it2) if isinstance(a, np.ndarray) else a for a in c.args]
        if not c.check(full):
            return "peer computed a wrong result"
        return float(json.loads(res.stdout.strip().splitlines()[-1])["best"])


def bench_launch(n: int = 300) -> float:
    """Empty kernel launch + wait through AMDDevice on the mock GPU, best of 5 rounds (s)."""
    from runtime.drivers.amd.device import AMDDevice
    dev = AMDDevice("mock-amd:0")
    try:
        prg = dev.program(AMDCompiler().compile("__kernel void e(__global int *o) {}"), "e")
        o = dev.alloc(64)
        for _ in range(30):
            prg(o, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                prg(o, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
            best = min(best, (time.perf_counter() - t0) / n)
        return best
    finally:
        dev.close()


def measure(quick: bool, peer: Path | None) -> list[Row]:
    rows = []
    for c in cases(quick):
        best, winst, ok = bench_ours(c)
        note = "" if ok else "OURS WRONG"
        peer_s: float | str | None = bench_peer(peer, c) if peer is not None else None
        pms = peer_s * 1e3 if isinstance(peer_s, float) else None
        if isinstance(peer_s, str):
            note = (note + "; " if note else "") + peer_s
        rows.append(Row(c.name, c.size, best * 1e3, pms, (pms / (best * 1e3)) if pms else None,
                        winst, winst / best, note))
    lat = bench_launch(100 if quick else 300)
    rows.append(Row("launch", "empty", lat * 1e3, None, None, 0, 0.0,
                    f"{lat * 1e6:.0f} us per launch+wait (target <= 100 us)"))
    return rows


def run(quick: bool = False) -> list[dict]:
    """Rows for scripts/bench_hcq.py (section rdna3): ours only."""
    out = []
    for r in measure(quick, None):
        out.append({"name": f"{r.case} {r.size} time", "value": r.ours_ms, "unit": "ms",
                    "note": r.note})
        if r.wave_instructions:
            out.append({"name": f"{r.case} {r.size} wave-instr/s",
                        "value": r.ours_wave_instr_per_s / 1e6, "unit": "M/s", "note": ""})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes")
    ap.add_argument("--json", default="bench_rdna3.json", help="where to write the results")
    ap.add_argument("--peer", type=Path, help="a tinygrad checkout to run its emulator from")
    args = ap.parse_args(argv)
    rows = measure(args.quick, args.peer)
    print(f"{'case':7} {'size':11} {'ours ms':>9} {'peer ms':>9} {'peer/ours':>9} "
          f"{'M wave-inst/s':>13}  note")
    for r in rows:
        peer = f"{r.peer_ms:9.1f}" if r.peer_ms is not None else f"{'-':>9}"
        ratio = f"{r.ratio:8.1f}x" if r.ratio is not None else f"{'-':>9}"
        rate = f"{r.ours_wave_instr_per_s / 1e6:13.3f}" if r.wave_instructions else f"{'-':>13}"
        print(f"{r.case:7} {r.size:11} {r.ours_ms:9.2f} {peer} {ratio} {rate}  {r.note}")
    meta = {"python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "load": os.getloadavg()[0],
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    Path(args.json).write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]},
                                          indent=1))
    print(f"load average {meta['load']:.1f} on {os.cpu_count()} cores; wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
