#!/usr/bin/env python3
"""Benchmark of the RDNA3 interpreter (runtime/drivers/mock/rdna3) beside tinygrad's emulator,
on the same code objects and the same sizes, in one run.

Cases (OpenCL C compiled once with clang-16 for gfx1100; Triton's from tests/runtime/data):
  axpb      c[i] = a[i] + b[i] * 2.0f, one element per lane, 256 per group (many waves)
  reduce    per-workgroup tree sum in LDS with barriers
  dynlds    the same sum in LDS the launch provides (a __local pointer argument: dynamic LDS)
  loop      ONE wave, a 4096-iteration dependent loop (per-instruction overhead)
  memloop   ONE wave, a loop that loads one float from global memory per iteration
  scratch   ONE wave with a 700-int private array (scratch loads and stores in a loop)
  cas       float atomic add by every lane into one address: clang's compare-and-swap retry
            loop under full contention, at 2^10, 2^11 and 2^12 lanes (how the cost grows)
  triton    Triton 3.6's vector add on its buffer-op path (MUBUF)
and, ours only, an empty kernel's launch + wait.

Every kernel is launched through the AMD runtime on the mock GPU (AMDDevice("mock-amd:0"): the
driver's code loading, kernel arguments and user SGPRs, the PM4 dispatch), as a program would.
The machine's speed drifts (up to 2x within seconds on a shared VM), so ours and the peer
alternate: in each of --rounds rounds every case runs once on our side and then once on the
peer's (tinygrad's test/mockgpu/amd/emu.py `run_asm`, kept loaded in one subprocess by
scripts/rdna3_peer.py --serve from a tinygrad checkout given with --peer), after one warm-up run
each. Printed per case: the best of the rounds of wall time and CPU time (time.process_time:
every thread of the process) per side, their ratios, the median over the rounds of each
round's CPU ratio (its two runs were back to back, so drift moves it less), and our
wave-instructions/s; the JSON file keeps every round. The peer's output is checked against numpy like ours; a case it cannot run
is reported with its error. The load average before and after is printed with the table.
--instructions adds a figure the load does not move: the machine instructions of one run of
the slow cases on each side, counted with valgrind (scripts/callgrind_region.py; minutes).

    python scripts/bench_rdna3.py [--quick] [--peer /path/to/tinygrad] [--only CASE,...]
                                  [--rounds N] [--instructions [CASE,...]] [--json FILE]
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

if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))
import callgrind_region  # noqa: E402  (beside this script)

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
    "dynlds": """
__kernel void dynlds(__global const float *in, __global float *out, __local float *s) {
  int lid = get_local_id(0);
  s[lid] = in[get_global_id(0)];
  __builtin_amdgcn_s_barrier();
  for (int k = 128; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
    __builtin_amdgcn_s_barrier();
  }
  if (lid == 0) out[get_group_id(0)] = s[0];
}""",
    "memloop": """
__kernel void memloop(__global const float *x, __global float *out, int n) {
  int i = get_global_id(0);
  float acc = 0.0f;
  for (int k = 0; k < n; k++) acc = acc * 0.5f + x[(k * 32 + i) & 4095];
  out[i] = acc;
}""",
    "scratch": """
__kernel void scratch(__global int *out, int n) {
  int a[700];
  int i = get_global_id(0);
  for (int k = 0; k < 700; k++) a[k] = k ^ i;
  int acc = 0;
  for (int r = 0; r < n; r++)
    for (int k = 0; k < 700; k += 7) acc += a[(k + r * 13 + i) % 700];
  out[i] = acc;
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
    ratio: float | None          # peer wall time / ours
    wave_instructions: int
    ours_wave_instr_per_s: float
    note: str = ""
    ours_cpu_ms: float | None = None
    peer_cpu_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _loop_ref(n: int) -> np.ndarray:
    acc = np.zeros(32, np.float32)
    lane = np.arange(32)
    for k in range(n):
        acc = (acc * np.float32(0.5) + (k ^ lane).astype(np.float32)).astype(np.float32)
    return acc


def _memloop_ref(x: np.ndarray, n: int) -> np.ndarray:
    acc = np.zeros(32, np.float32)
    lane = np.arange(32)
    for k in range(n):
        acc = (acc * np.float32(0.5) + x[(k * 32 + lane) & 4095]).astype(np.float32)
    return acc


def _scratch_ref(n: int) -> np.ndarray:
    lane = np.arange(32)
    a = np.arange(700)[None, :] ^ lane[:, None]
    acc = np.zeros(32, np.int64)
    for r in range(n):
        for k in range(0, 700, 7):
            acc += a[lane, (k + r * 13 + lane) % 700]
    return acc.astype(np.int32)


def _equal(i: int, want: np.ndarray) -> Callable[[list[np.ndarray]], bool]:
    """A check: buffer `i` equals `want` (bound here, not to the loop's later values)."""
    return lambda bufs: np.array_equal(bufs[i], want)


def _close(i: int, want: np.ndarray) -> Callable[[list[np.ndarray]], bool]:
    """A check: buffer `i` is `want` to within 1e-4 (float sums in another order)."""
    return lambda bufs: np.allclose(bufs[i], want, rtol=1e-4, atol=1e-4)


def _first_is(n: int) -> Callable[[list[np.ndarray]], bool]:
    """A check: the first element of buffer 0 is `n`."""
    return lambda bufs: float(bufs[0][0]) == n


def cases(quick: bool, only: set[str] | None = None) -> list[Case]:
    comp = AMDCompiler()
    missing = comp.available()
    if missing:
        raise SystemExit(f"bench_rdna3: {missing}")
    co = {name: comp.compile(src) for name, src in SOURCES.items()
          if only is None or name in only}
    rng = np.random.default_rng(0)
    out: list[Case] = []
    for lg in ([14, 16] if quick else [14, 16, 18]):
        n = 1 << lg
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        want = (a.astype(np.float64) + b * 2.0).astype(np.float32)
        out.append(Case("axpb", f"2^{lg}", co.get("axpb", b""), "axpb",
                        [a, b, np.zeros(n, np.float32)], (n // 256, 1, 1), (256, 1, 1),
                        _equal(2, want)))
        x = rng.standard_normal(n).astype(np.float32)
        ref = x.reshape(-1, 256).sum(1, dtype=np.float64)
        out.append(Case("reduce", f"2^{lg}", co.get("reduce", b""), "reduce",
                        [x, np.zeros(n // 256, np.float32), n], (n // 256, 1, 1), (256, 1, 1),
                        _close(1, ref)))
        # the __local pointer argument is the LDS offset of the dynamic part: 0 (no static LDS)
        out.append(Case("dynlds", f"2^{lg}", co.get("dynlds", b""), "dynlds",
                        [x, np.zeros(n // 256, np.float32), 0], (n // 256, 1, 1), (256, 1, 1),
                        _close(1, ref), dynamic_lds_B=256 * 4))
    loop_n = 4096
    out.append(Case("loop", f"{loop_n} it", co.get("loop", b""), "loop",
                    [np.zeros(32, np.float32), loop_n], (1, 1, 1), (32, 1, 1),
                    lambda bufs: np.array_equal(bufs[0], _loop_ref(loop_n))))
    mem_n = 1024
    xs = rng.standard_normal(4096).astype(np.float32)
    out.append(Case("memloop", f"{mem_n} it", co.get("memloop", b""), "memloop",
                    [xs, np.zeros(32, np.float32), mem_n], (1, 1, 1), (32, 1, 1),
                    lambda bufs: np.array_equal(bufs[1], _memloop_ref(xs, mem_n))))
    scr_n = 8
    out.append(Case("scratch", f"700 int, {scr_n}x", co.get("scratch", b""), "scratch",
                    [np.zeros(32, np.int32), scr_n], (1, 1, 1), (32, 1, 1),
                    lambda bufs: np.array_equal(bufs[0], _scratch_ref(scr_n))))
    for lg in ([10, 12] if quick else [10, 11, 12]):
        n = 1 << lg
        v = np.ones(n, np.float32)
        out.append(Case("cas", f"2^{lg} lanes", co.get("cas", b""), "cas",
                        [np.zeros(1, np.float32), v], (n // 256, 1, 1), (256, 1, 1),
                        _first_is(n)))
    tv = TRITON_DIR / "vector_add.hsaco"
    if tv.exists():
        meta = json.loads((TRITON_DIR / "vector_add.json").read_text())
        n = 1 << 16
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        out.append(Case("triton", "2^16", tv.read_bytes(), meta["name"],
                        [a, b, np.zeros(n, np.float32), n, 0, 0], (n // 1024, 1, 1),
                        (meta["num_warps"] * 32, 1, 1),
                        _equal(2, a + b)))
    return [c for c in out if only is None or c.name in only]


class MockRuntime:
    """AMDDevice on a mock GPU this benchmark owns (its dispatch log gives the statistics)."""

    def __init__(self) -> None:
        from runtime.drivers.amd.device import AMDDevice
        from runtime.drivers.mock.os import MockOS
        mos = MockOS.with_amd_gpus(1)
        self.gpu = mos.drivers[0].gpus[0]
        self.dev = AMDDevice("mock-amd:0", os=mos)
        self.dev.default_timeout_ms = 1_800_000

    def close(self) -> None:
        self.dev.close()


class OursCase:
    """A case loaded on a runtime (program, buffers) and run once to warm up (the first run
    also decodes the program); `run` times one more launch from the case's buffers."""

    def __init__(self, c: Case, rt: MockRuntime) -> None:
        self.c, self.rt, dev = c, rt, rt.dev
        self.prg = dev.program(c.code, c.kernel, dynamic_lds_B=c.dynamic_lds_B)
        self.bufs = [dev.alloc(max(a.nbytes, 4)) if isinstance(a, np.ndarray) else None
                     for a in c.args]
        self.ok = True
        self.run()

    def run(self) -> tuple[float, float, int, bool]:
        """(wall seconds, CPU seconds, wave-instructions, correct) of one launch + wait."""
        self.fill()
        dt, dc = self.launch()
        return (dt, dc, *self.check())

    def fill(self) -> None:
        """The case's buffers copied in (atomics accumulate)."""
        for a, b in zip(self.c.args, self.bufs):
            if b is not None:
                self.rt.dev.copyin(b, a.tobytes())

    def launch(self) -> tuple[float, float]:
        """(wall seconds, CPU seconds) of one launch + wait."""
        c = self.c
        args = [b if b is not None else a for a, b in zip(c.args, self.bufs)]
        t0, c0 = time.perf_counter(), time.process_time()
        self.prg(*args, global_size=c.grid, local_size=c.block, wait=True)
        return time.perf_counter() - t0, time.process_time() - c0

    def check(self) -> tuple[int, bool]:
        """(wave-instructions, correct) of the last launch."""
        c, dev = self.c, self.rt.dev
        winst = self.rt.gpu.dispatches[-1].stats.wave_instructions
        got = []
        for a, b in zip(c.args, self.bufs):
            if b is None:
                got.append(a)
                continue
            out = np.empty_like(a)
            dev.copyout(out, b)
            got.append(out)
        ok = bool(c.check(got))
        self.ok = self.ok and ok
        return winst, ok

    def close(self) -> None:
        self.prg.free()
        for b in self.bufs:
            if b is not None:
                self.rt.dev.free(b)


def bench_ours(c: Case, rt: MockRuntime | None = None) -> tuple[float, float, int, bool]:
    """(best wall seconds, best CPU seconds, wave-instructions, correct) of c.repeats launches
    through the AMD runtime on the mock GPU, after one to warm up."""
    own = rt is None
    rt = rt or MockRuntime()
    try:
        oc = OursCase(c, rt)
        runs = [oc.run() for _ in range(c.repeats)]
        oc.close()
        return (min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2],
                oc.ok and all(r[3] for r in runs))
    finally:
        if own:
            rt.close()


def _peer_env(tmp: str) -> dict[str, str]:
    env = dict(os.environ)
    clang = shutil.which("clang-16")
    if clang:
        # tinygrad's CPU backend, which runs the emulator's instruction kernels, calls
        # `clang` (a real clang: it passes --target).
        os.symlink(clang, Path(tmp) / "clang")
        env["PATH"] = f"{tmp}{os.pathsep}{env.get('PATH', '')}"
        env["CC"] = str(Path(tmp) / "clang")
    return env


def _peer_job(c: Case, path: Path) -> list[str]:
    """Writes the case as scripts/rdna3_peer.py's job file; the names of its buffers."""
    names = [f"buf{i}" for i, a in enumerate(c.args) if isinstance(a, np.ndarray)]
    it = iter(names)
    meta = {"kernel": c.kernel, "grid": list(c.grid), "block": list(c.block),
            "args": [next(it) if isinstance(a, np.ndarray) else a for a in c.args],
            "repeats": c.repeats, "dynamic_lds_B": c.dynamic_lds_B}
    # Any, not ndarray: to numpy's stubs a ** dict may reach savez's keyword allow_pickle (a
    # bool), though no buffer is named so; passing allow_pickle=True to rule that out would save
    # an array of that name under numpy < 2.1, which has no such keyword
    arrays: dict[str, Any] = {
        nm: a for nm, a in zip(names, (a for a in c.args if isinstance(a, np.ndarray)))}
    np.savez(path, code=np.frombuffer(c.code, np.uint8), meta=json.dumps(meta), **arrays)
    return names


def _peer_check(c: Case, path: Path, names: list[str]) -> bool:
    out = np.load(path.with_suffix(".out.npz"))
    it = iter([out[nm] for nm in names])
    return bool(c.check([next(it) if isinstance(a, np.ndarray) else a for a in c.args]))


class PeerServer:
    """tinygrad's emulator in one subprocess (scripts/rdna3_peer.py --serve) that keeps each
    case loaded and warmed up, so that a benchmark can alternate ours and the peer run by run
    without paying the peer's start-up and warm-up again."""

    def __init__(self, peer: Path) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self._err = open(Path(self._tmp.name) / "stderr", "w+")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "rdna3_peer.py"), str(peer), "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True,
            env=_peer_env(self._tmp.name))
        self._jobs: dict[int, tuple[Path, list[str]]] = {}

    def run(self, c: Case, n: int = 1) -> tuple[list[float], list[float]] | str:
        """(wall, CPU) seconds of n runs of c on the peer, after its warm-up the first time c
        is seen; or why not (a failure, or a wrong result)."""
        if id(c) not in self._jobs:
            path = Path(self._tmp.name) / f"job{len(self._jobs)}.npz"
            self._jobs[id(c)] = (path, _peer_job(c, path))
        path, names = self._jobs[id(c)]
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(f"{path} {n}\n")
            self.proc.stdin.flush()
            while True:   # (the emulator may print lines of its own)
                line = self.proc.stdout.readline()
                if not line:
                    self._err.seek(0)
                    last = (self._err.read().strip().splitlines() or ["?"])[-1]
                    return f"peer exited: {last[:120]}"
                if line.startswith("{"):
                    break
        except BrokenPipeError:
            return "peer exited"
        ans = json.loads(line)
        if "error" in ans:
            return f"peer failed: {ans['error'][:120]}"
        if not _peer_check(c, path, names):
            return "peer computed a wrong result"
        return ans["times"], ans["cpu"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()
        self._tmp.cleanup()


def bench_peer(peer: Path, c: Case) -> tuple[float, float] | str:
    """Best (wall, CPU) seconds of c.repeats runs of the same code object on tinygrad's
    emulator, or why not."""
    srv = PeerServer(peer)
    try:
        got = srv.run(c, c.repeats)
        return got if isinstance(got, str) else (min(got[0]), min(got[1]))
    finally:
        srv.close()


def bench_launch(n: int = 300) -> tuple[float, float]:
    """Empty kernel launch + wait through AMDDevice on the mock GPU: best of 5 rounds of n,
    (wall, CPU) seconds per launch."""
    rt = MockRuntime()
    try:
        dev = rt.dev
        prg = dev.program(AMDCompiler().compile("__kernel void e(__global int *o) {}"), "e")
        o = dev.alloc(64)
        for _ in range(30):
            prg(o, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
        best = best_cpu = float("inf")
        for _ in range(5):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                prg(o, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
            best = min(best, (time.perf_counter() - t0) / n)
            best_cpu = min(best_cpu, (time.process_time() - c0) / n)
        return best, best_cpu
    finally:
        rt.close()


def measure(quick: bool, peer: Path | None, only: set[str] | None = None,
            rounds: int = 3) -> list[Row]:
    """Every case, ours and the peer alternately: in each of `rounds` rounds, one run of each
    case on our side and then on the peer's (after one warm-up run each in the first); a row
    keeps the best of the rounds per side and, in `extra`, every round's (wall, CPU) ms."""
    cs = cases(quick, only)
    rt = MockRuntime()
    srv = PeerServer(peer) if peer is not None and cs else None
    ours: list[list[tuple[float, float]]] = [[] for _ in cs]
    theirs: list[list[tuple[float, float]] | str] = [[] for _ in cs]
    winst, loaded = [0] * len(cs), []
    try:
        loaded = [OursCase(c, rt) for c in cs]
        for _ in range(rounds):
            for i, c in enumerate(cs):
                dt, dc, winst[i], _ = loaded[i].run()
                ours[i].append((dt * 1e3, dc * 1e3))
                had = theirs[i]
                if srv is not None and not isinstance(had, str):
                    got = srv.run(c)
                    if isinstance(got, str):
                        theirs[i] = got
                    else:
                        had.append((got[0][0] * 1e3, got[1][0] * 1e3))
        for oc in loaded:
            oc.close()
    finally:
        if srv is not None:
            srv.close()
        rt.close()
    rows = []
    for c, oc, o, p, w in zip(cs, loaded, ours, theirs, winst):
        note = "" if oc.ok else "OURS WRONG"
        best, cpu = min(x[0] for x in o), min(x[1] for x in o)
        pms = pcpu = None
        if isinstance(p, str):
            note = (note + "; " if note else "") + p
        elif p:
            pms, pcpu = min(x[0] for x in p), min(x[1] for x in p)
        extra: dict[str, Any] = {"rounds_ours_ms": o,
                                 "rounds_peer_ms": p if isinstance(p, list) else []}
        if isinstance(p, list) and p:
            # each round's ours and peer ran back to back: their ratio moves less with the
            # machine's drift than the ratio of the two sides' best rounds
            extra["cpu_ratio_median_of_rounds"] = float(np.median(
                [pc / oc for (_, oc), (_, pc) in zip(o, p) if oc > 0]))
        rows.append(Row(c.name, c.size, best, pms, (pms / best) if pms else None, w,
                        w / (best / 1e3), note, cpu, pcpu, extra))
    if only is None or "launch" in only:
        lat, lat_cpu = bench_launch(100 if quick else 300)
        rows.append(Row("launch", "empty", lat * 1e3, None, None, 0, 0.0,
                        f"{lat * 1e6:.0f} us per launch+wait (target <= 60 us)", lat_cpu * 1e3))
    return rows


# The cases whose instructions --instructions counts unless told which
COUNTED = "memloop,scratch,cas"


def count_ours(c: Case) -> int:
    """Machine instructions of one launch + wait of c through our runtime (after a warm-up
    run), counted by callgrind in a subprocess (scripts/callgrind_region.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "cg.log"
        env = dict(os.environ, PYTHONHASHSEED="0")
        res = subprocess.run(callgrind_region.command(
            log, [str(Path(__file__).resolve()), "--count-one", c.name, c.size]),
            capture_output=True, text=True, env=env, timeout=1800)
        if res.returncode != 0 or "counted ok" not in res.stdout:
            raise RuntimeError(f"counting ours on {c.name} {c.size} failed: "
                               f"{(res.stdout + res.stderr).strip()[-300:]}")
        return callgrind_region.collected(log)


def count_peer(peer: Path, c: Case) -> int | str:
    """Machine instructions of one run of c on the peer (after its warm-up), or why not."""
    with tempfile.TemporaryDirectory() as tmp:
        log, job = Path(tmp) / "cg.log", Path(tmp) / "job.npz"
        names = _peer_job(c, job)
        env = dict(_peer_env(tmp), PYTHONHASHSEED="0")
        # tinygrad's CPU backend compiles its kernels for the host (-march=native); valgrind
        # implements no AVX-512, so on a host that has it the counted run would die of SIGILL.
        # AVX2 code runs the same emulator, counted.
        env.setdefault("DEV", "CPU:CLANG:x86_64,x86-64-v3")
        res = subprocess.run(callgrind_region.command(
            log, [str(ROOT / "scripts" / "rdna3_peer.py"), str(peer), str(job), "--count"]),
            capture_output=True, text=True, env=env, timeout=1800)
        if res.returncode != 0:
            last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else \
                f"exit status {res.returncode}"
            return f"peer failed: {last[:120]}"
        if not _peer_check(c, job, names):
            return "peer computed a wrong result"
        return callgrind_region.collected(log)


def _count_one(name: str, size: str) -> int:
    """(--count-one, inside callgrind) one counted launch of the case `name` at `size`."""
    from runtime.drivers.mock import amd_pm4
    # Under valgrind everything runs tens of times slower, so the mock's queue would run the
    # dispatch in tens of times more time slices (each with its bookkeeping) than it does at
    # full speed: one slice for the whole dispatch counts the work itself.
    amd_pm4.DISPATCH_SLICE_S = 3600.0
    c = next(c for c in cases(False, {name}) if c.size == size)
    rt = MockRuntime()
    try:
        oc = OursCase(c, rt)
        oc.fill()
        with callgrind_region.region():
            oc.launch()
        oc.check()
        print("counted ok" if oc.ok else "counted WRONG")
        oc.close()
    finally:
        rt.close()
    return 0


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--quick", action="store_true", help="fewer sizes")
    ap.add_argument("--json", default="bench_rdna3.json", help="where to write the results")
    ap.add_argument("--peer", type=Path, help="a tinygrad checkout to run its emulator from")
    ap.add_argument("--only", help="comma-separated cases to run (axpb,reduce,dynlds,loop,"
                    "memloop,scratch,cas,triton,launch)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of one run per case and side, ours then the peer (best of "
                    "them per side; default 3)")
    ap.add_argument("--instructions", nargs="?", const=COUNTED, metavar="CASES",
                    help="also count the machine instructions of one run of these cases on "
                    f"each side with valgrind (default {COUNTED}; slow: minutes)")
    ap.add_argument("--count-one", nargs=2, metavar=("CASE", "SIZE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.count_one:
        return _count_one(*args.count_one)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.peer is not None and not (args.peer / "test" / "mockgpu" / "amd" / "emu.py").exists():
        ap.error(f"--peer {args.peer}: no tinygrad checkout there (test/mockgpu/amd/emu.py)")
    if args.instructions and callgrind_region.available():
        ap.error(f"--instructions: {callgrind_region.available()}")
    only = set(args.only.split(",")) if args.only else None
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    rows = measure(args.quick, args.peer, only, args.rounds)
    load1 = os.getloadavg()
    print(f"{args.rounds} round(s), ours then the peer per case; best of the rounds per side "
          "(peer/ours: wall and CPU of the best rounds; rnd: median of each round's CPU ratio)")
    print(f"{'case':7} {'size':15} {'ours ms':>9} {'cpu ms':>9} {'peer ms':>9} {'cpu ms':>9} "
          f"{'peer/ours':>9} {'cpu':>7} {'rnd':>7} {'M wave-inst/s':>13}  note")
    for r in rows:
        peer = f"{r.peer_ms:9.1f}" if r.peer_ms is not None else f"{'-':>9}"
        pcpu = f"{r.peer_cpu_ms:9.1f}" if r.peer_cpu_ms is not None else f"{'-':>9}"
        ocpu = f"{r.ours_cpu_ms:9.2f}" if r.ours_cpu_ms is not None else f"{'-':>9}"
        ratio = f"{r.ratio:8.1f}x" if r.ratio is not None else f"{'-':>9}"
        cratio = (f"{r.peer_cpu_ms / r.ours_cpu_ms:6.1f}x"
                  if r.peer_cpu_ms is not None and r.ours_cpu_ms else f"{'-':>7}")
        med = r.extra.get("cpu_ratio_median_of_rounds")
        mratio = f"{med:6.1f}x" if med is not None else f"{'-':>7}"
        rate = f"{r.ours_wave_instr_per_s / 1e6:13.3f}" if r.wave_instructions else f"{'-':>13}"
        print(f"{r.case:7} {r.size:15} {r.ours_ms:9.2f} {ocpu} {peer} {pcpu} {ratio} {cratio} "
              f"{mratio} {rate}  {r.note}")
    print(f"load average (1/5/15 min) {load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f} before, "
          f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} after, on {os.cpu_count()} cores; "
          f"{time.perf_counter() - t0:.0f} s")
    if args.instructions:
        counted = set(args.instructions.split(","))
        print("machine instructions of one run (callgrind), millions")
        print(f"{'case':7} {'size':15} {'ours':>9} {'peer':>9} {'peer/ours':>9}")
        for r, c in zip(rows, cases(args.quick, only)):
            if r.case not in counted:
                continue
            n_ours = count_ours(c)
            n_peer = count_peer(args.peer, c) if args.peer is not None else "no --peer"
            r.extra["instructions_ours"] = n_ours
            r.extra["instructions_peer"] = n_peer
            if isinstance(n_peer, int):
                print(f"{r.case:7} {r.size:15} {n_ours / 1e6:9.1f} {n_peer / 1e6:9.1f} "
                      f"{n_peer / n_ours:8.2f}x")
            else:
                print(f"{r.case:7} {r.size:15} {n_ours / 1e6:9.1f} {'-':>9} {'-':>9}  {n_peer}")
    meta = {"python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "load_before": load0, "load_after": load1,
            "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "rounds": args.rounds}
    Path(args.json).write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]},
                                          indent=1))
    print(f"wrote {args.json}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
