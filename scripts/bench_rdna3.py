#!/usr/bin/env python3
"""Benchmark of the RDNA3 interpreter (runtime/drivers/mock/rdna3) on one core.

Kernels (OpenCL C compiled with clang-16 for gfx1100, one element per work-item, 256 per group):
  axpb    c[i] = a[i] + b[i] * 2.0f                         float32, 2^16 .. 2^20 elements
  reduce  per-workgroup tree sum in LDS with barriers       float32, 2^16 .. 2^20 elements
For each: best-of-N wall time, elements/s, wave-instructions/s and lane-instructions/s.

Peer: tinygrad's per-wave Python emulator (test/mockgpu/amd/emu.py). With --peer DIR (a tinygrad
checkout) the same code objects run on it in a subprocess, at sizes it finishes in reasonable
time; the issue quotes 2.2M elements/s for a+b*2 at 2^20 (470 ms) for its own kernel.

    python scripts/bench_rdna3.py [--quick] [--json bench_rdna3.json] [--peer /path/to/tinygrad]
                                  [--save-code DIR | --prebuilt DIR]
`run(quick)` returns the rows for scripts/bench_hcq.py.
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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.drivers.amd.compiler import AMDCompiler  # noqa: E402
from runtime.drivers.mock.rdna3.loader_for_tests import TestDevice  # noqa: E402

KERNELS = {
    "axpb": """
__kernel void axpb(__global const float *a, __global const float *b, __global float *c) {
  int i = get_global_id(0);
  c[i] = a[i] + b[i] * 2.0f;
}""",
    # __builtin_amdgcn_s_barrier() rather than barrier(): the peer cannot decode the cache
    # invalidation (buffer_gl0_inv) that OpenCL's barrier() fence emits.
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
}
PEER_QUOTED = {"axpb": ("2^20", 2.2e6)}


@dataclass
class Row:
    kernel: str
    elements: int
    best_ms: float
    median_ms: float
    elements_per_s: float
    wave_instructions_per_s: float
    lane_instructions_per_s: float
    waves: int
    wave_instructions: int
    who: str = "ours"


def _setup(dev: TestDevice, name: str, co: bytes, n: int, rng: np.random.Generator):
    k = dev.load(co)
    if name == "axpb":
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        out = dev.alloc(4 * n)
        args = [dev.upload(a), dev.upload(b), out]

        def check() -> None:
            got = dev.download(out, n, np.float32)
            np.testing.assert_array_equal(got, (a.astype(np.float64) + b * 2.0).astype(np.float32))
    else:
        a = rng.standard_normal(n).astype(np.float32)
        out = dev.alloc(4 * (n // 256))
        args = [dev.upload(a), out, n]

        def check() -> None:
            got = dev.download(out, n // 256, np.float32)
            np.testing.assert_allclose(got, a.reshape(-1, 256).sum(1, dtype=np.float64),
                                       rtol=1e-4, atol=1e-4)
    return k, args, check


def bench_ours(name: str, co: bytes, n: int, repeats: int) -> Row:
    dev = TestDevice()
    k, args, check = _setup(dev, name, co, n, np.random.default_rng(0))
    stats = dev.launch(k, args, (n // 256,), (256,))  # warm-up: decode and compile once
    check()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        stats = dev.launch(k, args, (n // 256,), (256,))
        times.append(time.perf_counter() - t0)
    best = min(times)
    return Row(name, n, best * 1e3, float(np.median(times)) * 1e3, n / best,
               stats.wave_instructions / best, stats.lane_instructions / best, stats.waves,
               stats.wave_instructions)


_PEER_SCRIPT = r"""
import json, struct, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from runtime.drivers.amd import elf
from test.mockgpu.amd import emu
name, n, repeats = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
co = elf.parse(open(sys.argv[5], "rb").read())
k = co.kernels[name]
image = np.frombuffer(co.image(), dtype=np.uint8).copy()
ptr = lambda x: x.ctypes.data
a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
if name == "axpb":
    b = a[::-1].copy(); out = np.zeros(n, np.float32)
    kernarg = struct.pack("<QQQ", ptr(a), ptr(b), ptr(out))
else:
    out = np.zeros(n // 256, np.float32)
    kernarg = struct.pack("<QQi", ptr(a), ptr(out), n)
ka = np.zeros(64, np.uint8); ka[:len(kernarg)] = np.frombuffer(kernarg, np.uint8)
pkt = np.zeros(64, np.uint8)
pkt[:24] = np.frombuffer(struct.pack("<HHHHHHIII", 2, 1, 256, 1, 1, 0, n, 1, 1), np.uint8)
user = [ptr(pkt) & 0xFFFFFFFF, ptr(pkt) >> 32, ptr(ka) & 0xFFFFFFFF, ptr(ka) >> 32]
rsrc2 = k.kd.rsrc2 | (2 << 15)   # LDS_SIZE: 2 granules of 512 B
entry = ptr(image) + k.entry_vaddr
run = lambda: emu.run_asm(entry, len(image) - k.entry_vaddr, n // 256, 1, 1, 256, 1, 1, ptr(ka),
                          rsrc2, 0, "rdna3", user)
run()  # warm-up: the peer compiles every instruction once
times = []
for _ in range(repeats):
    t0 = time.perf_counter(); run(); times.append(time.perf_counter() - t0)
ok = bool(np.allclose(out, (a + b * 2) if name == "axpb" else a.reshape(-1, 256).sum(1),
                      rtol=1e-4, atol=1e-4))
print(json.dumps({"best": min(times), "median": float(np.median(times)), "ok": ok}))
"""


def bench_peer(peer: Path, name: str, co: bytes, n: int, repeats: int) -> Row | str:
    """The same code object on tinygrad's emulator (a subprocess: it changes global FP state)."""
    env = dict(os.environ, PYTHONPATH=f"{peer}{os.pathsep}{ROOT}")
    with tempfile.TemporaryDirectory() as tmp:
        if shutil.which("clang-16"):
            # tinygrad's CPU backend, which runs the peer's instruction kernels, calls `clang`
            # (which must be a real clang: it passes --target).
            os.symlink(shutil.which("clang-16"), Path(tmp) / "clang")
            env["PATH"] = f"{tmp}{os.pathsep}{env.get('PATH', '')}"
            env["CC"] = str(Path(tmp) / "clang")  # tinygrad reads $CC before $PATH
        path = Path(tmp) / "k.hsaco"
        path.write_bytes(co)
        res = subprocess.run([sys.executable, "-c", _PEER_SCRIPT, str(peer), name, str(n),
                              str(repeats), str(path)], capture_output=True, text=True, env=env,
                             timeout=1800)
    if res.returncode != 0:
        return f"peer failed: {res.stderr.strip().splitlines()[-1] if res.stderr else '?'}"
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if not out["ok"]:
        return "peer computed a wrong result"
    best = out["best"]
    return Row(name, n, best * 1e3, out["median"] * 1e3, n / best, 0.0, 0.0, n // 32, 0, "peer")


def code_objects(prebuilt: Path | None = None) -> dict[str, bytes] | str:
    """The benchmark kernels compiled now, or NAME.hsaco from `prebuilt` (for machines without
    clang-16/ld.lld-16); a string says why neither works."""
    if prebuilt is not None:
        return {name: (prebuilt / f"{name}.hsaco").read_bytes() for name in KERNELS}
    compiler = AMDCompiler()
    missing = compiler.available()
    if missing:
        return f"skipped: {missing} (or pass --prebuilt DIR)"
    return {name: compiler.compile(src) for name, src in KERNELS.items()}


def measure(quick: bool, peer: Path | None = None,
            prebuilt: Path | None = None) -> tuple[list[Row], list[str]]:
    codes = code_objects(prebuilt)
    if isinstance(codes, str):
        return [], [codes]
    sizes = [1 << 16, 1 << 20] if quick else [1 << 16, 1 << 18, 1 << 20]
    repeats = 3 if quick else 7
    rows = [bench_ours(name, codes[name], n, repeats) for name in KERNELS for n in sizes]
    notes = []
    if peer is not None:
        for name in KERNELS:
            for n in ([1 << 14] if quick else [1 << 14, 1 << 16]):
                r = bench_peer(peer, name, codes[name], n, 1 if quick else 3)
                if isinstance(r, str):
                    notes.append(f"{name} 2^{n.bit_length() - 1}: {r}")
                else:
                    rows.append(r)
    return rows, notes


def _speedups(rows: list[Row]) -> list[str]:
    out = []
    ours = {(r.kernel, r.elements): r for r in rows if r.who == "ours"}
    for r in rows:
        if r.who != "peer":
            continue
        mine = ours.get((r.kernel, r.elements)) or max(
            (o for o in ours.values() if o.kernel == r.kernel), key=lambda o: o.elements)
        out.append(f"{r.kernel}: ours {mine.elements_per_s / 1e6:.1f}M elem/s at "
                   f"2^{mine.elements.bit_length() - 1} vs peer {r.elements_per_s / 1e6:.3f}M "
                   f"at 2^{r.elements.bit_length() - 1}: "
                   f"{mine.elements_per_s / r.elements_per_s:.0f}x")
    for name, (size, rate) in PEER_QUOTED.items():
        big = [o for o in ours.values() if o.kernel == name and o.elements == 1 << 20]
        if big:
            out.append(f"{name}: ours {big[0].elements_per_s / 1e6:.1f}M elem/s at 2^20 "
                       f"({big[0].best_ms:.1f} ms) vs quoted peer {rate / 1e6:.1f}M at {size}: "
                       f"{big[0].elements_per_s / rate:.1f}x")
    return out


def run(quick: bool = False) -> list[dict]:
    """Rows for scripts/bench_hcq.py (section rdna3)."""
    rows, notes = measure(quick)
    if not rows:
        return [{"name": "rdna3", "value": 0.0, "unit": "skipped", "note": "; ".join(notes)}]
    out = []
    for r in rows:
        tag = f"{r.kernel} 2^{r.elements.bit_length() - 1}"
        out.append({"name": f"{tag} time", "value": r.best_ms, "unit": "ms",
                    "note": f"median {r.median_ms:.1f} ms"})
        out.append({"name": f"{tag} elements/s", "value": r.elements_per_s / 1e6,
                    "unit": "M/s", "note": ""})
        out.append({"name": f"{tag} wave-instr/s", "value": r.wave_instructions_per_s / 1e6,
                    "unit": "M/s", "note": f"{r.waves} waves"})
        out.append({"name": f"{tag} lane-instr/s", "value": r.lane_instructions_per_s / 1e6,
                    "unit": "M/s", "note": ""})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    ap.add_argument("--json", default="bench_rdna3.json", help="where to write the results")
    ap.add_argument("--peer", type=Path, help="a tinygrad checkout to run the peer emulator from")
    ap.add_argument("--prebuilt", type=Path, help="load NAME.hsaco from here instead of compiling")
    ap.add_argument("--save-code", type=Path, help="write the compiled NAME.hsaco files here")
    args = ap.parse_args(argv)
    if args.save_code is not None:
        codes = code_objects()
        if isinstance(codes, str):
            print(codes)
            return 1
        args.save_code.mkdir(parents=True, exist_ok=True)
        for name, co in codes.items():
            (args.save_code / f"{name}.hsaco").write_bytes(co)
    rows, notes = measure(args.quick, args.peer, args.prebuilt)
    if not rows:
        print("\n".join(notes))
        return 0
    print(f"{'who':5} {'kernel':7} {'elements':>9} {'best ms':>9} {'median ms':>9} "
          f"{'M elem/s':>9} {'M wave-inst/s':>13} {'M lane-inst/s':>13}")
    for r in rows:
        print(f"{r.who:5} {r.kernel:7} {'2^' + str(r.elements.bit_length() - 1):>9} "
              f"{r.best_ms:9.1f} {r.median_ms:9.1f} {r.elements_per_s / 1e6:9.2f} "
              f"{r.wave_instructions_per_s / 1e6:13.2f} {r.lane_instructions_per_s / 1e6:13.1f}")
    summary = _speedups(rows) + notes
    for line in summary:
        print(line)
    meta = {"python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "processor": _cpu_name(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    Path(args.json).write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows],
                                           "summary": summary}, indent=1))
    print(f"wrote {args.json}")
    return 0


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
